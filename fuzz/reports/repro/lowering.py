"""The lowering form of a torch-mlir lowering failure that names a torch op:
that op alone, exported as the target exports and lowered to its output
type, failing with the stored bucket key; torch, numpy and torch-mlir only,
no IREE."""

from __future__ import annotations

from typing import Any

from fuzz.reports.repro.graph import (
    _captured,
    _export,
    _first_failing,
    _op_failure_script,
    _op_fails_as_stored,
    _op_shapes,
    _OpModule,
)
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget
from oracles.results import Stage
from fuzz.targets.pipeline import export, lower


def _lowering_error_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """For a torch-mlir lowering failure naming a torch op: the first node of
    that op in the program the target exported (with the arguments it really
    got on batch 0) whose own module, exported as the target exports (static, or every
    dimension dynamic) and lowered to the target's output type, fails with
    the stored bucket key; None when none does (an op that fails only in
    the context of the model: the model form shows it)."""
    exported = _export(entry, target)
    named = [n for n in exported.graph_module.graph.nodes
             if n.op == "call_function" and _torch_op_name(n.target) == entry.op]
    op = _first_failing(_captured(exported, entry, target, named[:_MAX_LOWERING_CANDIDATES]),
                        lambda op: _lowering_fails_as_stored(entry, op, target))
    return None if op is None else {**op.files, "repro.py": _lowering_error_script(entry, target, op)}


# Nodes of the named op tried per lowering bucket (~0.1-0.3 s each: export + lowering).
_MAX_LOWERING_CANDIDATES = 12


def _torch_op_name(op: Any) -> str:
    """An ATen overload as torch-mlir's dialect names it: ``aten.gather.default``
    is ``torch.aten.gather``, ``aten.to.dtype`` is ``torch.aten.to.dtype``."""
    return "torch." + str(op).removesuffix(".default")


def _lowering_fails_as_stored(entry: CorpusEntry, op: _OpModule, target: CompiledTarget) -> bool:
    """Whether ``op``'s module exports and then fails torch-mlir's lowering to
    the target's output type with the entry's bucket key."""
    return _op_fails_as_stored(entry, op, Stage.IMPORT, lambda module, operands: lower(
        export(module, operands, _op_shapes(op, target.dynamic)), target.output_type))


def _lowering_error_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    return _op_failure_script(entry, target, op, title=f"torch-mlir lowers {op.op} alone to {target.output_type} "
                              "and fails as the DLRM did", stage=Stage.IMPORT, lower=True,
                              passed="lowering passed")
