"""The export form of an EXPORT_ERROR: the one op of the model whose own
``torch.export`` (static, or every dimension dynamic, as the target
exported) fails with the stored bucket key; torch and numpy only."""

from __future__ import annotations

import operator

from fuzz.reports.repro.graph import (
    _first_failing,
    _op_failure_script,
    _op_fails_as_stored,
    _op_shapes,
    _OpModule,
    _recorded,
    _traced,
)
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget
from oracles.results import Stage
from fuzz.targets.pipeline import export


def _export_error_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """For an EXPORT_ERROR: the first op of the model whose own torch.export,
    made as the target made the model's (static, or every dimension
    dynamic), fails with the stored bucket key (``oracles.classify`` and
    ``oracles.signature``, as bucketing keys it); None when no op does. The
    model is traced to ATen ops by ``make_fx``, which needs no export, on
    batch 0; ops outside ATen (quantized kernels) and ops taking packed
    weights are tried first: that is where export breaks."""
    graph, inputs = _traced(entry, target)
    candidates = [n for n in graph.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    candidates.sort(key=lambda n: not str(n.target).startswith("quantized.")
                    and not any(a.op == "get_attr" for a in n.all_input_nodes))
    op = _first_failing(_recorded(graph, inputs, candidates[:_MAX_EXPORT_CANDIDATES]),
                        lambda op: _export_fails_as_stored(entry, op, target.dynamic))
    return None if op is None else {**op.files, "repro.py": _export_error_script(entry, target, op)}


# Single-op exports tried per EXPORT_ERROR bucket (~0.05 s each).
_MAX_EXPORT_CANDIDATES = 60


def _export_fails_as_stored(entry: CorpusEntry, op: _OpModule, dynamic: bool) -> bool:
    """Whether torch.export of ``op``'s module (built from the very lines the
    script holds) fails with the entry's bucket key."""
    return _op_fails_as_stored(entry, op, None, lambda module, operands: export(
        module, operands, _op_shapes(op, dynamic)))


def _export_error_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    return _op_failure_script(entry, target, op, title=f"torch.export of {op.op} alone fails as the DLRM's "
                              "export did", stage=Stage.EXPORT, lower=False, passed="export passed")
