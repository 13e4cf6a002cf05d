"""Is a failure a toolchain *incompatibility* rather than a bug?

Comparing two toolchains (``dlrm-fuzz bump``, ``bisect``) runs today's
harness, and the MLIR today's torch-mlir writes, through another IREE. An
older IREE may not parse that text (an op, attribute or target description
it does not know yet), or may not take a flag the harness passes; a newer
one may have dropped one. Such a failure says nothing about the bug being
compared, so it must be reported as "cannot compare" with its reason, never
as a new or a fixed bug. Pure string functions over a signature key (the
``verdict|owner|...|normalized first error line`` of ``oracles.signature``).
"""

from __future__ import annotations

import re

__all__ = ["incompatibility", "INCOMPATIBLE_PATTERNS"]

# MLIR parser and command-line diagnostics: the input or the flags were not
# understood, nothing was compiled. Each pattern names the reason shown.
INCOMPATIBLE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), reason) for pattern, reason in (
        (r"custom op '[^']*' is unknown", "the compiler does not know an op of the program"),
        (r"unregistered operation", "the compiler does not know an op of the program"),
        (r"dialect [`'][^`']*' not found", "the compiler lacks a dialect the program uses"),
        (r"failed to parse \w+", "the compiler cannot parse an attribute of the program"),
        (r"struct is missing required parameter", "the compiler cannot parse an attribute "
                                                  "of the program"),
        (r"unknown (attribute|parameter|keyword)", "the compiler cannot parse the program"),
        (r"expected (attribute|type|operation|'[^']*') ", "the compiler cannot parse the program"),
        (r"(unknown|unrecognized) command line (argument|option)|unknown option",
         "the compiler does not take a flag the harness passes"),
        (r"bytecode version", "the program's bytecode version is not supported"),
    ))
_COMPILE_VERDICTS = ("compile_error", "lowering_invalid_ir", "lowering_error")


def incompatibility(key: str) -> str | None:
    """The reason ``key`` (a signature key) is a toolchain incompatibility,
    or None when it is an ordinary failure. Only compile-side failures count:
    a wrong answer or a runtime error means the program was understood."""
    if not isinstance(key, str):
        raise TypeError(f"key={key!r}: expected a signature key string")
    verdict = key.split("|", 1)[0].lower()
    if verdict not in _COMPILE_VERDICTS:
        return None
    for pattern, reason in INCOMPATIBLE_PATTERNS:
        if pattern.search(key):
            return reason
    return None
