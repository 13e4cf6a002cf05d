"""Error-message normalization: the part of a toolchain message that names the
fault, with everything that only says where or on what it was noticed removed,
so one bug hit from many configs, batches and call sites keys one bucket.

What goes: the accidents of one sample (SSA names, shapes, numbers, paths,
source locations), the dump of the operation a legalization failed on, and
the runtime's account of where it noticed the fault (IREE's "; while invoking
native function ..." call chain, C source file:line, binding / operand
ordinals, byte sizes and offsets, device ordinals). What stays: the words of
the diagnostic, the operation (or ``torch.operator`` name) it blames, status
codes, signal names and stages, so two different faults never share a key.
The rules are one ordered table; each says why it exists.
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["normalize_error", "NORMALIZERS", "MAX_KEY_CHARS"]

# A key longer than this adds nothing a triager can use; it only has to be
# stable, and every rule below runs before the cut.
MAX_KEY_CHARS = 300

_OP_DUMP = re.compile(
    # "failed to legalize operation 'X' that was explicitly marked illegal: %5:4 =
    # "X"(%a, %b) <{name = "..."}> : (types) -> types": the dump after the colon
    # repeats the op with this sample's operands and types (si32 vs si64 indices,
    # a none vs a tensor for per-sample weights). Only a torch.operator's name
    # says which op it is; keep that, drop the rest.
    r"(marked illegal):.*?(?:<\{name = (\"[^\"]*\")\}>.*)?$")


def _keep_operator_name(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"{match.group(1)}: name = {name}" if name else f"{match.group(1)}"


# A replacement: a template, or a function of the match (``re.sub`` takes both).
_Replacement = str | Callable[[re.Match[str]], str]

NORMALIZERS: tuple[tuple[re.Pattern[str], _Replacement], ...] = (
    # Op dump after a legalization failure (see _OP_DUMP): first, while the
    # name attribute is still intact.
    (_OP_DUMP, _keep_operator_name),
    # IREE status annotations name the call chain that noticed the fault, not
    # the fault: "; while invoking native function hal.fence.await; while
    # calling variadic import" for a dispatch that failed asynchronously vs
    # "hal.device.queue.execute; while calling import" for the same dispatch
    # failing at submission. Every "; while ..." clause is such a frame.
    (re.compile(r";\s*while [^;]*"), ""),
    # MLIR locations: the Python line of the model that produced the op.
    (re.compile(r"loc\((?:[^()]|\([^()]*\))*\)"), "loc(...)"),
    (re.compile(r'"[^"]*\.py":\d+:\d+'), "<file>"),
    # Source file:line of the toolchain itself ("c/runtime/src/iree/hal/drivers/
    # vulkan/command_buffer.c:1337", "/x/y.cpp:12", "<stdin>:26:46"): moves with
    # every release and build, the fault does not.
    (re.compile(r"(?:[\w.+-]*/)+[\w.+-]+\.(?:py|mlir|c|cc|cpp|cxx|h|hpp|inc)\b(?::\d+)*"),
     "<src>"),
    (re.compile(r"<stdin>(?::\d+)+"), "<src>"),
    # ONNX value and node names the exporter numbers (val_39, node_GatherND_41,
    # n19_12, n3_84_n3_83_n4_55): numbering follows the graph.
    (re.compile(r"\bval_\d+\b"), "val"),
    (re.compile(r"\bnode_([A-Za-z]+)_\d+\b"), r"node_\1"),
    (re.compile(r"\bn\d+(?:_n?\d+)+\b"), "n"),
    # SSA values (%12, %arg3, %result0, %63:4): numbering follows the program.
    # Before the ordinal rule, which would otherwise eat the 3 of %arg3.
    (re.compile(r"%[\w.#-]+(?::\d+)?"), "%v"),
    # Device ordinals: the same fault on device 0 or device 3 is one fault.
    (re.compile(r"\b(\w+)://\d+\b"), r"\1://N"),
    (re.compile(r"\bdevice\s*(?:#|ordinal\s*)?\d+\b", re.I), "device N"),
    # Binding, operand, result, argument and set ordinals: which binding of a
    # dispatch was empty depends on which table had no indices.
    (re.compile(r"\b(binding|operand|result|argument|arg|input|output|set|slot)"
                r"\s*(?:#|\[)?\s*\d+\]?", re.I), r"\1 N"),
    # Byte sizes and offsets, with or without a unit ("256B", "4096 bytes",
    # "1.5 MiB"): they scale with the sample. A unit glued to the number would
    # escape the plain-number rule below.
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:[KMGT]i?B|B|bytes?)\b"), "N"),
    # Durations ("no answer within 120s"): the harness's time limit, not the
    # fault; the unit glued to the number escapes the plain-number rule too.
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:ns|us|ms|s|sec|min|h)\b"), "N"),
    # Shapes: [3, 4], [?], [10,12] (torch vtensor shapes; dynamic or not).
    (re.compile(r"\[[\d,\s?-]*\]"), "[...]"),
    (re.compile(r"tensor<[^<>]*>"), "tensor<...>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x..."),
    # Any other number (ranks, counts, time limits, memory caps), except an
    # exit status, which tells two different deaths apart.
    (re.compile(r"(?<!exit code )\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b"), "N"),
    # Whitespace and the separators left dangling by removed clauses.
    (re.compile(r"\s+"), " "),
    (re.compile(r"[;:,\s]+$"), ""),
)


def normalize_error(line: str) -> str:
    """The fault an error line names, as a stable key (see the module doc).

    Pure text in, text out: the same input always gives the same key, so keys
    stored in a corpus stay valid as long as this table does not change."""
    text = line
    for pattern, replacement in NORMALIZERS:
        text = pattern.sub(replacement, text)
    return text.strip()[:MAX_KEY_CHARS]
