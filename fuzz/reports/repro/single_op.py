"""The single-op form of a wrong answer localized to an op: that op alone, fed
the inputs it really got on batch 0, compiled and run the way the target
did, and judged against the same op in float64 (a float64 twin computes the
dtypes the op names in float64)."""

from __future__ import annotations

from fuzz.reports.repro.graph import _captured, _export, _find_op, _op_module, _OpModule
from fuzz.reports.repro.script import _target_slots
from fuzz.reports.repro.template import fill
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget


def _single_op_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """The culprit op alone, fed the inputs it got in the eager run of batch 0."""
    exported = _export(entry, target)
    found = _find_op(exported.graph_module, str(entry.culprit).removeprefix("op:"))
    if found is None:
        return None
    node, index = found
    op = _op_module(node, index, *_captured(exported, entry, target, [node])[0][1])
    assert op is not None  # an exported graph holds no TorchScript objects
    return {**op.files, "repro.py": _single_op_script(entry, target, op)}


def _single_op_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    return fill("single_op", {**_target_slots(target), "stages": False, "op_name": op.op,
                              "signature": entry.signature, "data": op.data_lines,
                              "op_class": op.class_lines})
