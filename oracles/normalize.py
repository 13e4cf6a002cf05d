"""Error-message normalization: the part of a toolchain message that names the
fault, with the accidents of one sample (SSA names, shapes, numbers, paths,
source locations) removed, so one bug hit from many configs keys one bucket.
"""

from __future__ import annotations

import re

__all__ = ["normalize_error"]

_NORMALIZERS = (
    (re.compile(r"loc\((?:[^()]|\([^()]*\))*\)"), "loc(...)"),
    (re.compile(r'"[^"]*\.py":\d+:\d+'), "<file>"),
    (re.compile(r"(?:/[\w.+-]+)+\.(?:py|mlir|cpp|h)(?::\d+)*"), "<path>"),
    (re.compile(r"%[\w.#-]+"), "%v"),
    (re.compile(r"\[[\d,\s?-]*\]"), "[...]"),
    (re.compile(r"tensor<[^<>]*>"), "tensor<...>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x..."),
    (re.compile(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b"), "N"),
    (re.compile(r"\s+"), " "),
)


def normalize_error(line: str) -> str:
    text = line
    for pattern, replacement in _NORMALIZERS:
        text = pattern.sub(replacement, text)
    return text.strip()[:300]
