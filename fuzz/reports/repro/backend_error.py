"""The backend form of an IREE compile failure: the one op of the model whose
own program, exported as the target exports, lowered to its output type and
compiled by ``iree-compile`` with the target's backend and flags, fails with
the stored bucket key; torch, numpy, torch-mlir and IREE's compiler only.

An IREE codegen failure often hangs on one op kind (an i64 remainder on an
int64-less Vulkan target: ``arith.remsi`` left illegal): that op alone is the
report a backend maintainer wants, found in a few single-op compiles instead
of a model-level shrink whose every step compiles the whole model for a slow
backend (0.2-0.7 steps/s on lavapipe). The ops the error names (an ``arith``
op's ATen source, a dtype) are tried first, each op kind once; a fault that
needs the model's context (a fusion of several ops, most dynamic-shape
failures) finds no op within the cap and falls back to the model form."""

from __future__ import annotations

import re
from typing import Any

from fuzz.reports.repro.graph import (
    _captured,
    _export,
    _first_failing,
    _op_failure_script,
    _op_fails_as_stored,
    _op_kinds,
    _op_shapes,
    _OpModule,
)
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget
from fuzz.targets.pipeline import Timer
from oracles.results import Stage

__all__ = ["backend_candidates"]

# Op kinds tried per bucket, and the seconds the search may take (one
# single-op compile is 0.3-1 s on lavapipe).
_MAX_CANDIDATES = 12
_SEARCH_S = 30.0

# The ATen ops an MLIR op in a backend's error comes from, by a word of its name.
_SOURCES = {"rem": ("remainder", "fmod"), "div": ("div", "floor_divide"),
            "ceildiv": ("div",), "floordiv": ("div", "floor_divide"), "max": ("max", "clamp"),
            "min": ("min", "clamp"), "cmp": ("eq", "ne", "lt", "gt", "le", "ge", "where"),
            "select": ("where", "clamp", "relu"), "exp": ("exp", "sigmoid"),
            "fptosi": ("to",), "sitofp": ("to",), "trunc": ("to",), "ext": ("to",),
            "matmul": ("mm", "bmm", "linear", "addmm"), "gather": ("embedding", "index")}
_MLIR_OP = re.compile(r"\b(?:arith|math|linalg)\.([a-z_]+)")
# Element types of an error, as torch names them.
_DTYPES = {"bf16": "bfloat16", "f16": "float16", "i64": "int64", "i1": "bool", "f64": "float64"}


def _hints(error: str) -> tuple[set[str], set[str]]:
    """The ATen op words and the dtypes an IREE error points at."""
    words: set[str] = set()
    for name in _MLIR_OP.findall(error):
        for part, sources in _SOURCES.items():
            if part in name:
                words.update(sources)
    dtypes = {torch_name for mlir, torch_name in _DTYPES.items()
              if re.search(rf"\b{mlir}\b", error)}
    return words, dtypes


def backend_candidates(graph_module: Any, error: str) -> list[Any]:
    """The op kinds of ``graph_module`` (``graph._op_kinds``), the ones
    ``error`` points at first (an op its MLIR op comes from, then an op on a
    dtype it names), then the rest in graph order."""
    words, dtypes = _hints(error)

    def rank(node: Any) -> tuple[bool, bool]:
        types = {str(getattr(a.meta.get("val"), "dtype", "")).removeprefix("torch.")
                 for a in node.all_input_nodes}
        named = any(word == part for word in words for part in str(node.target).split(".")[1:2])
        return (not named, not dtypes & types)

    return sorted(_op_kinds(graph_module), key=rank)


def _backend_error_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """For an IREE compile failure: the first op kind whose module alone
    (its real arguments on batch 0) compiles for the target with the stored
    bucket key; None when none does within the cap."""
    exported = _export(entry, target)
    nodes = backend_candidates(exported.graph_module, entry.error)[:_MAX_CANDIDATES]
    op = _first_failing(_captured(exported, entry, target, nodes),
                        lambda op: _compile_fails_as_stored(entry, op, target), _SEARCH_S)
    return None if op is None else {**op.files, "repro.py": _backend_error_script(entry, target, op)}


def _compile_fails_as_stored(entry: CorpusEntry, op: _OpModule, target: CompiledTarget) -> bool:
    """Whether ``op``'s module lowers and then fails the target's compile with
    the entry's bucket key (``iree-compile`` runs as a tool: a crash of it is
    a failure, not this process's end)."""
    return _op_fails_as_stored(entry, op, Stage.COMPILE, lambda module, operands: target.compile_module(
        module, operands, _op_shapes(op, target.dynamic), Timer()))


def _backend_error_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    return _op_failure_script(entry, target, op, title=f"IREE compiles {op.op} alone for {target.name} "
                              "and fails as the DLRM did", stage=Stage.COMPILE, lower=True,
                              passed="compile passed", backend=True)
