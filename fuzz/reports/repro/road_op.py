"""The one-op road form, for an error of a road case (export, import, compile
or run failure on the ONNX, onnxruntime or turbine road): the first op of the
model, exported as the road exports it, whose own module, fed the arguments
it really got on batch 0, fails the target's own pipeline
(``compile_module``, then ``run``) at the same stage with the stored bucket
key. The script (``templates/road_op.py``) is that module through the road's
own packages only, with the op's ``model.onnx`` and ``commands.sh`` beside
it on the ONNX roads. A fault that needs the model's context has no such op:
the search is capped (candidates and seconds) so that costs little, and the
road form (``road.py``) reproduces it instead."""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Sequence

from fuzz.reports.repro.core import _ToolchainFailed, fault_parts
from fuzz.reports.repro.graph import (_captured, _first_failing, _op_fails_as_stored, _op_instance, _op_kinds,
                                     _op_shapes, _OpModule, _recorded, _traced)
from fuzz.reports.repro.road import _onnx_tool_files, _road_export, _road_slots, _stand_in, road_of, \
    road_target
from fuzz.reports.repro.script import _target_slots
from fuzz.reports.repro.template import fill
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import Target
from fuzz.targets.onnx_export import export_module
from fuzz.targets.pipeline import StageFailure, Timer
from oracles.results import Stage
from oracles.verdict import Verdict

__all__ = ["ROAD_OP_VERDICTS", "has_road_op_form"]

# The road errors a single op may show alone (not a wrong answer: that needs
# localization; not a crash or hang: those need a supervised child).
ROAD_OP_VERDICTS = (Verdict.EXPORT_ERROR, Verdict.LOWERING_UNSUPPORTED_OP, Verdict.LOWERING_INVALID_IR,
                    Verdict.LOWERING_ERROR, Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR)

# The search's caps: a fault that needs the model's context costs this much
# before the road form takes over (each try is an export, and past an export
# failure an import and an iree-compile: ~0.3-2 s).
_MAX_CANDIDATES = 24
_SEARCH_SECONDS = 30.0

# The ATen ops an ONNX op named in the fault comes from (the exporter's
# translations of what a DLRM calls): tried first after the ops named
# themselves. The plain bag is an onnx.Loop over a sequence; the loop-free
# bag's rows are an index (GatherND); tables, gathers and selects are Gathers.
_ONNX_SOURCES = {"Loop": ("embedding_bag",), "SequenceEmpty": ("embedding_bag",),
                 "ConcatFromSequence": ("embedding_bag",), "GatherND": ("index", "embedding_bag"),
                 "Gather": ("embedding", "embedding_bag", "index", "select", "index_select"),
                 "GatherElements": ("gather",), "ScatterND": ("index_put",),
                 "ScatterElements": ("scatter", "scatter_add")}

def has_road_op_form(entry: CorpusEntry, table: dict[str, Target] | None = None) -> bool:
    """Whether the entry is a road case's error, which the one-op road form is tried for."""
    return entry.verdict in ROAD_OP_VERDICTS and road_target(entry, table) is not None


def _road_op_files(entry: CorpusEntry, target: Any) -> dict[str, str | bytes] | None:
    """The first op (likely ones first: ``_ordered``) whose own module fails
    the target's pipeline at the entry's stage with its bucket key, as
    repro.py and what it loads; None when none does within the caps (the
    seconds count the road's export of the model too)."""
    began = time.monotonic()
    graph, record = _program(entry, target)
    candidates = _ordered(_op_kinds(graph), entry)[:_MAX_CANDIDATES]
    op = _first_failing(record(candidates), lambda op: _road_fails_as_stored(entry, op, target),
                        _SEARCH_SECONDS - (time.monotonic() - began))
    if op is None:
        return None
    return {**op.files, **_op_tool_files(op, target), "repro.py": _road_op_script(entry, target, op)}


_Recorder = Callable[[Sequence[Any]], list[tuple[Any, tuple[tuple[Any, ...], dict[str, Any]]]]]


def _program(entry: CorpusEntry, target: Any) -> tuple[Any, _Recorder]:
    """The graph the ops are cut from and how their batch-0 arguments are
    recorded: the model as the road exports it (``road._road_export``); where
    that export is the very failure (a ``torch.export`` bug, owned alike on
    every road), the model traced to ATen by ``make_fx``, as the export form does."""
    try:
        exported = _road_export(entry, target)
    except _ToolchainFailed:
        if entry.verdict is not Verdict.EXPORT_ERROR:
            raise
        traced, inputs = _traced(entry, target)
        return traced, lambda nodes: _recorded(traced, inputs, nodes)
    return exported.graph_module, lambda nodes: _captured(exported, entry, target, nodes)


def _ordered(nodes: list[Any], entry: CorpusEntry) -> list[Any]:
    """Likely ones first: ops the fault names (``quantized.embedding_bag_byte_rowwise_offsets``,
    ``torch.aten.embedding_bag.padding_idx``), then the ATen sources of an ONNX
    op it names (``_ONNX_SOURCES``), then for an export error quantized ops and
    ops taking packed weights (where export breaks); the rest in graph order."""
    text = " ".join((entry.signature, entry.op or "", entry.error or ""))
    sources = {aten for onnx, atens in _ONNX_SOURCES.items()
               if re.search(rf"(?<![\w]){onnx}(?![\w])", text) for aten in atens}

    def rank(node: Any) -> int:
        name = str(node.target)
        packet = name.rsplit(".", 1)[0] if name.count(".") > 1 else name
        if any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text) for n in (name, packet)):
            return 0
        if packet.split(".")[-1] in sources:
            return 1
        if entry.verdict is Verdict.EXPORT_ERROR and (name.startswith("quantized.") or any(
                "ScriptObject" in type(a.meta.get("val")).__name__ for a in node.all_input_nodes)):
            return 2
        return 3

    return sorted(nodes, key=rank)


def _road_fails_as_stored(entry: CorpusEntry, op: _OpModule, target: Any) -> bool:
    """Whether ``op``'s module, compiled by the target's own pipeline and,
    for a run failure, run on its operands, fails at the entry's stage with
    its bucket key (``graph._op_fails_as_stored``)."""
    stage = Stage.parse(str(entry.stage))

    def through_the_road(module: Any, operands: tuple[Any, ...]) -> None:
        timer = Timer()
        artifact = target.compile_module(module, operands, _op_shapes(op, target.dynamic), timer)
        if stage is Stage.RUN:
            target.run(artifact, op.operands, timer)

    try:
        return _op_fails_as_stored(entry, op, stage, through_the_road)
    except ValueError:  # the exported op takes other inputs than its operands (one folded in)
        return False


def _op_tool_files(op: _OpModule, target: Any) -> dict[str, str | bytes]:
    """On an ONNX road, the op's own model.onnx and the command-line tools on
    it; nothing where its export is the failure."""
    import torch

    if road_of(target) == "turbine":
        return {}
    module = _op_instance(op)
    try:
        model = export_module(module, tuple(torch.from_numpy(a) for a in op.operands),
                              _op_shapes(op, target.dynamic), target.bags)
    except StageFailure:
        return {}
    return _onnx_tool_files(target, model, f"{op.op} alone, as model.onnx,",
                            "--input=...  # one --input per operand (ARGS in repro.py)")


def _road_op_script(entry: CorpusEntry, target: Any, op: _OpModule) -> str:
    """``templates/road_op.py`` filled: the op on the target's road, to the entry's stage."""
    stage = Stage.parse(str(entry.stage))
    slots: dict[str, object] = {
        **_target_slots(_stand_in(target), backend=stage not in (Stage.EXPORT, Stage.IMPORT)),
        "stages": True, "op_name": op.op,
        "road_words": target.description.removeprefix("road "), "signature": entry.signature,
        "stage": stage.value, "fault": fault_parts(entry), "data": op.data_lines,
        "op_class": op.class_lines}
    slots.update(_road_slots(entry, target, bool(slots["vulkan"])))
    return fill("road_op", slots)
