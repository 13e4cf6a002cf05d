"""Turns what a failing toolchain said into a verdict, the one error line that
matters, and the operation it blames.

torch-mlir's exception text is mostly boilerplate ("Failure while executing
pass pipeline"); the real diagnostic is an MLIR ``error:`` line, which the
pipeline captures from stderr and prepends. This module picks that line and
decides between "no lowering exists" and "a lowering produced bad IR".
"""

from __future__ import annotations

import re
import signal

from oracles.results import Failure
from oracles.verdict import Verdict

__all__ = ["classify", "first_error_line", "blamed_op", "compiler_crash_line"]

_UNSUPPORTED = (
    re.compile(r"failed to legalize operation"),
    re.compile(r"unsupported by backend contract", re.I),
    re.compile(r"\bnot (?:yet )?(?:supported|implemented)\b", re.I),
    re.compile(r"\bunsupported\b", re.I),
    re.compile(r"no (?:lowering|conversion|decomposition)", re.I),
)
_INVALID_IR = (
    re.compile(r"failed to verify"),
    re.compile(r"verification failed", re.I),
    re.compile(r"op (?:requires|expects?|expected)\b"),
    re.compile(r"'[\w.]+' op .*(?:must be|mismatch|does not match|invalid)"),
    re.compile(r"use of value .* expects different type"),
    re.compile(r"type mismatch|incompatible (?:types|shapes)", re.I),
)
_BOILERPLATE = re.compile(
    r"^(python exception|for torch-mlir developers|\$ torch-mlir-opt|add '-mlir-print|"
    r"lowering .* failed with the following diagnostics)", re.I)

# A Python warning printed while a stage ran lands in the captured stderr
# ahead of the diagnostic: "<file>:105: FutureWarning: ..." and, indented on
# the next line, the source line it points at. Neither names the fault.
_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")

# Long enough that a torch.operator's name attribute, after its operand list,
# survives the cut (the bucket key and blamed op need it).
MAX_LINE_CHARS = 1000

_STAGE_VERDICT = {
    "build": Verdict.EXPORT_ERROR,
    "export": Verdict.EXPORT_ERROR,
    "compile": Verdict.COMPILE_ERROR,
    "run": Verdict.RUNTIME_ERROR,
}


def first_error_line(message: str) -> str:
    """The first line that carries meaning: an ``error:`` diagnostic if any,
    else the first line that is neither boilerplate nor a Python warning.
    A compiler that crashed says so, with where (see ``compiler_crash_line``)."""
    lines = _meaningful_lines(message)
    crashed = compiler_crash_line(message, lines)
    if crashed is not None:
        return crashed
    for line in lines:
        if "error:" in line:
            return line[line.index("error:"):][:MAX_LINE_CHARS]
    for line in lines:
        if not _BOILERPLATE.match(line):
            return line[:MAX_LINE_CHARS]
    return lines[0][:MAX_LINE_CHARS] if lines else ""


_STACK_FRAME = re.compile(r"^#\d+\s+0x[0-9a-fA-F]+\s+(.*)$")
# Frames that are the crash handler or libc, not the code that crashed.
_HANDLER_FRAME = re.compile(r"llvm::sys::|SignalHandler|__restore_rt|^\(|^0x|libc\.so|"
                            r"abort|raise|__assert_fail")
# The function a frame names, most specific first: a lambda passed through
# llvm::function_ref names its enclosing IREE / MLIR function inside <...>.
_FRAME_FUNCTIONS = (re.compile(r"mlir::iree_compiler::[\w:]+"),
                    re.compile(r"(?<![\w:])mlir::(?!Operation\b)[\w:]+[a-z]\w*"),
                    re.compile(r"(?<![\w:])llvm::(?!function_ref|sys::)[\w:]+"))
_FRAME_SOURCE = re.compile(r"\b(\w+\.(?:cpp|cc|c|h|hpp|inc))(?::\d+)*\s*$")


def compiler_crash_line(message: str, lines: list[str] | None = None) -> str | None:
    """``iree-compile crashed (SIGFPE) in mlir::iree_compiler::...::f
    (File.cpp)`` for a compiler that died with LLVM's "Stack dump:" (else
    None). The text around a crash names only the tool ("Error invoking IREE
    compiler tool iree-compile"), the same for every crash; the first frame
    below the signal handler (or the failed assertion) says which crash it is."""
    if "Stack dump:" not in message and "Assertion `" not in message:
        return None
    lines = _meaningful_lines(message) if lines is None else lines
    code = re.search(r"Error code: (-?\d+)", message)
    head = f"iree-compile crashed ({_exit_name(int(code.group(1))) if code else 'unknown exit'})"
    assertion = re.search(r"Assertion `(.*?)' failed", message)
    if assertion:
        return f"{head}: assertion `{assertion.group(1)}' failed"[:MAX_LINE_CHARS]
    for line in lines:
        frame = _STACK_FRAME.match(line)
        if frame is None or _HANDLER_FRAME.search(frame.group(1)):
            continue
        text = frame.group(1)
        name = next((m.group(0) for p in _FRAME_FUNCTIONS for m in [p.search(text)] if m),
                    text.split("(")[0].strip())
        source = _FRAME_SOURCE.search(text)
        return f"{head} in {name}" + (f" ({source.group(1)})" if source else "")
    return head


def _exit_name(code: int) -> str:
    """-8 -> SIGFPE: a word, which normalization keeps (numbers it drops)."""
    try:
        return signal.Signals(-code).name if code < 0 else f"exit status {code}"
    except ValueError:
        return f"signal {-code}"


# torch's C++ / glog log prefix: severity, date, time, thread id, file:line.
_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+:\d+\]\s*")


def _meaningful_lines(message: str) -> list[str]:
    """Non-blank stripped lines, less Python warnings and their source lines,
    and less the time-and-thread prefix of log lines (it would make every
    occurrence of one error a key of its own)."""
    kept: list[str] = []
    after_warning = False
    for raw in message.splitlines():
        raw = _LOG_PREFIX.sub("", raw)
        if _WARNING.match(raw):
            after_warning = True
            continue
        if after_warning and raw[:1].isspace():
            after_warning = False
            continue
        after_warning = False
        if raw.strip():
            kept.append(raw.strip())
    return kept


def blamed_op(line: str) -> str | None:
    """The operation an error line names: ``'torch.aten.x'``, ``'arith.select' op``,
    or a ``torch.operator`` with ``name = "..."``."""
    named = re.search(r'name = "([\w.:]+)"', line)
    if named:
        return named.group(1)
    quoted = re.search(r"(?:operation|op) '([\w.]+)'|'([\w.]+)' op\b", line)
    if quoted:
        return quoted.group(1) or quoted.group(2)
    aten = re.search(r"\b(aten\.[\w.]+|quantized\.[\w.]+)", line)
    return aten.group(1) if aten else None


def classify(failure: Failure) -> tuple[Verdict, str, str | None]:
    """(verdict, first meaningful line, blamed op) for a failed target."""
    if failure.timed_out:
        return Verdict.TIMEOUT, failure.message, None
    if failure.signal is not None or failure.exit_code is not None \
            or failure.error_type == "MemoryError":
        return Verdict.CRASH, failure.message, None
    line = first_error_line(failure.message)
    op = blamed_op(line)
    if failure.stage == "import":
        if any(p.search(line) for p in _UNSUPPORTED) or failure.error_type == "NotImplementedError":
            return Verdict.LOWERING_UNSUPPORTED_OP, line, op
        if any(p.search(line) for p in _INVALID_IR):
            return Verdict.LOWERING_INVALID_IR, line, op
        return Verdict.LOWERING_ERROR, line, op
    return _STAGE_VERDICT.get(failure.stage, Verdict.RUNTIME_ERROR), line, op
