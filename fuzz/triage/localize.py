"""Localize a numeric MISMATCH to the first divergent ATen op.

A MISMATCH says the compiled model's answer is wrong, not which lowering made
it wrong. This module exports the model the way the target does (the one
recipe, ``fuzz.model.recipe``: with weights as inputs, the seed's weights are
the program's leading inputs), adds every intermediate of the ATen graph as
an extra output, compiles and runs that program through the target's own
code path (same export, lowering, flags, device), and compares each
intermediate with the same graph evaluated eagerly in float64 (with eager
float32 for the tolerance slack, exactly as ``oracles.compare`` judges final
outputs). Integer and boolean intermediates (index arithmetic: the QR
quotient's float-to-int cast, its remainder) are judged exactly instead, so a
wrong index is blamed on the op that computed it, not on the
``embedding_bag`` that reads it. Walking the graph in topological order, the
first op whose compiled value is out of tolerance is the culprit,
named by its overload plus the arguments that select its lowering, e.g.
``aten.embedding_bag.padding_idx[per_sample_weights]``: one bug reached from
different configs gets one name, different ops get different names. Exposing
intermediates changes the program (fusion, buffer reuse), so a bug can vanish
under observation; that is reported, never hidden. It runs inside a worker
process; toolchain failures become a ``Localization`` with a note, only bugs
of ours raise.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from fuzz.targets.cache import ArtifactCache
from fuzz.targets.pipeline import StageFailure, Timer, memory_stage
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target
from fuzz.targets.opnames import culprit_name
from oracles.compare import Comparison, Tolerance, compare, summarize
from fuzz.targets import pipeline
from oracles.classify import first_error_line

__all__ = ["UNOBSERVED", "VANISHED", "OWN_PROGRAM_MATCHES", "Localization", "first_divergent_op", "InvalidLocalizeArgument"]

# The two ways a wrong answer did not show when localization looked at it:
# the instrumented program answers right while the plain one is wrong, or the
# plain program compiled again answers right too. Either way the stored case
# cannot name an op, and only its model repro can show the bug (the campaign
# holds such a case back until that repro reproduces: ``fuzz.engine.filing``).
VANISHED = "mismatch vanished when intermediates were exposed"
OWN_PROGRAM_MATCHES = "no mismatch to localize: the target's own program matches"
UNOBSERVED = (VANISHED, OWN_PROGRAM_MATCHES)

# Integer arguments that pick a code path (an enum in disguise), as opposed
# to dims, sizes and row numbers, which vary with the sample and never name a bug.


class InvalidLocalizeArgument(ValueError):
    """A call of ``first_divergent_op`` that cannot mean anything (bad batch index)."""


@dataclass(frozen=True)
class Localization:
    """Where a mismatch starts: ``culprit`` names the first divergent op (None
    when not found; ``note`` then says why), ``method`` how it was found
    ("intermediates" or "none"), ``details`` the evidence (node, errors, counts)."""

    culprit: str | None
    method: str
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, recorded with the finding (``Triage`` adds the target)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Localization":
        """Read a stored localization back, tolerating fields older cases lack."""
        return cls(data.get("culprit"), str(data.get("method", "none")), str(data.get("note", "")),
                   dict(data.get("details") or {}))


def first_divergent_op(target: Target, sample: Sample, batch: int, tolerance: Tolerance = Tolerance(),
                       timer: Timer | None = None, cache: ArtifactCache | None = None) -> Localization:
    """The first ATen op of the model whose output, compiled by ``target`` and run
    on ``sample.batches[batch]``, is out of ``tolerance`` of float64 eager."""
    if not 0 <= batch < len(sample.batches):
        raise InvalidLocalizeArgument(f"batch={batch}: sample has {len(sample.batches)} batches; "
                                      f"pass 0..{len(sample.batches) - 1}")
    if not target.compiles_modules:
        return _not_found(f"target={target.name!r} cannot compile a module with extra outputs")
    try:
        return _localize(target, sample, batch, tolerance, timer or Timer(), cache)
    except StageFailure as failure:  # eager PyTorch over the memory cap (memory_stage)
        return _not_found(f"{failure.stage}: {failure.error_type}: {failure.message[:300]}")


@dataclass(frozen=True)
class _Probe:
    """One observed intermediate: graph node, output position, culprit name,
    and whether it is judged exactly (an integer or boolean value)."""

    node: str
    position: int
    culprit: str
    exact: bool = False


def _not_found(note: str, **details: Any) -> Localization:
    return Localization(None, "none", note, details)


def _localize(target: Target, sample: Sample, batch: int, tolerance: Tolerance, timer: Timer,
              cache: ArtifactCache | None) -> Localization:
    from fuzz.model.recipe import call_args, eager_args, leading_inputs, recipe

    config = sample.config
    flat = sample.batches[batch].flat()
    dynamic = bool(getattr(target, "dynamic", False))
    try:  # the target's own program (the one recipe), weights as inputs included
        module, export_args, spec = recipe(config, sample.seed, dynamic, flat, memory_stage)
        exported = timer.measure("export", lambda: pipeline.export(module, export_args, spec))
    except StageFailure as failure:
        return _toolchain_failed("exporting the model", failure)
    graph_module, probes, outputs = _instrument(exported.module())

    reference = _reference(graph_module, eager_args(config, sample.seed, flat, memory_stage), config)
    if isinstance(reference, str):
        return _not_found(reference)
    ref64, eager32 = reference
    lead = leading_inputs(config, sample.seed, memory_stage)
    try:
        artifact = target.compile_module(graph_module, export_args, spec, timer, cache)
        got = target.run(artifact, call_args(lead, flat), timer)
    except StageFailure as failure:
        return _toolchain_failed("compiling the program with intermediates as outputs", failure)
    if len(got) != len(ref64):
        return _not_found(f"the instrumented program returned {len(got)} values, "
                          f"expected {len(ref64)}")
    return _judge(target, sample, batch, tolerance, timer, cache, probes, outputs,
                  ref64, eager32, got)


def _judge(target: Target, sample: Sample, batch: int, tolerance: Tolerance, timer: Timer,
           cache: ArtifactCache | None, probes: list[_Probe], outputs: int,
           ref64: list[np.ndarray], eager32: list[np.ndarray], got: list[np.ndarray]) -> Localization:
    """Name the first probe out of tolerance, if the program still mismatches."""
    first = _first_bad(probes, ref64, eager32, got, tolerance)
    details: dict[str, Any] = {"intermediates": len(probes),
                               "exact_intermediates": sum(p.exact for p in probes),
                               "target": target.name, "batch": batch}
    final_ok = all(compare(ref64[k], eager32[k], got[k], tolerance).ok for k in range(outputs))
    if final_ok:
        if first is not None:  # a divergence that does not reach the output: not the bug
            details["harmless_divergence"] = first[0].culprit
        baseline = _baseline_mismatches(target, sample, batch, tolerance, timer, cache)
        if isinstance(baseline, str):
            return _not_found(baseline, **details)
        if baseline:
            return _not_found(VANISHED, **details)
        return _not_found(OWN_PROGRAM_MATCHES, **details)
    if first is None:  # only when an output is no op's result (an input passed through)
        return _not_found("the output mismatches but no op's result does", **details)
    probe, comparison, compared = first
    details.update(node=probe.node, compared=compared, reason=comparison.reason,
                   max_abs_error=comparison.numbers["max_abs_error"],
                   max_rel_error=comparison.numbers["max_rel_error"])
    return Localization(probe.culprit, "intermediates",
                        f"first of {len(probes)} intermediates out of tolerance: {probe.node}",
                        details)


def _first_bad(probes: list[_Probe], ref64: list[np.ndarray], eager32: list[np.ndarray],
               got: list[np.ndarray], tolerance: Tolerance) -> tuple[_Probe, Comparison, int] | None:
    for count, probe in enumerate(probes, start=1):
        k = probe.position
        value = np.asarray(got[k])
        comparison = _compare_exact(ref64[k], eager32[k], value) if probe.exact \
            else compare(ref64[k], eager32[k], value, tolerance)
        if not comparison.ok:
            return probe, comparison, count
    return None


def _compare_exact(ref64: np.ndarray, eager32: np.ndarray, got: np.ndarray) -> Comparison:
    """Judge an integer or boolean intermediate: each element must equal eager
    float32's or the float64 twin's value exactly (no tolerance: an index off
    by one is never rounding). Either, not only the twin's: the twin evaluates
    integer ops on the same integers as eager, but a float-to-int cast reads a
    float computed in float64 there, and a truncation may land one apart from
    float32's. A compiled program computes
    in the model's dtype, so eager's integer is the one it owes; one that
    computes more precisely may land on the twin's. Either is healthy, so a
    correct compiler never false-alarms; anything else is a wrong integer.
    Compared by value (numpy promotion), not dtype: a backend may return an
    int64 as int32 (emulated 64-bit integers) or a boolean as bytes."""
    if got.shape != ref64.shape:
        return Comparison(False, f"shape {list(got.shape)} != expected {list(ref64.shape)}",
                          {"got": summarize(got), "expected": summarize(ref64)})
    bad = (got != ref64) & (got != eager32)
    err = np.abs(got.astype(np.float64) - ref64.astype(np.float64))
    numbers: dict[str, Any] = {  # relative to at least 1: row 0 read as row 1 is 100 % off
        "max_abs_error": float(err.max()) if err.size else 0.0,
        "max_rel_error": float((err / np.maximum(np.abs(ref64.astype(np.float64)), 1.0)).max())
        if err.size else 0.0,
        "bad_elements": int(bad.sum()), "elements": int(bad.size),
        "got": summarize(got), "expected": summarize(ref64),
    }
    if not bad.any():
        return Comparison(True, "", numbers)
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    numbers.update(first_bad_index=list(where), first_bad_got=got[where].item(),
                   first_bad_expected=ref64[where].item())
    return Comparison(False, f"{numbers['bad_elements']}/{bad.size} elements off (exact), first at "
                             f"{list(where)}: got {got[where]}, expected {ref64[where]}", numbers)


def _baseline_mismatches(target: Target, sample: Sample, batch: int, tolerance: Tolerance,
                         timer: Timer, cache: ArtifactCache | None) -> bool | str:
    """Whether the target's own program (no extra outputs) mismatches on this
    batch, which tells "vanished under observation" from "nothing to
    localize"; a string says why that could not be checked."""
    import torch

    from fuzz.model.dlrm import build, build_reference, to_torch
    from fuzz.model.recipe import call_args

    config = sample.config
    flat = sample.batches[batch].flat()
    try:
        artifact = target.compile(config, sample.seed, flat, timer, cache)
        lead = target.leading_inputs(config, sample.seed, timer)
        got = target.run(artifact, call_args(lead, flat), timer)[0]
    except StageFailure as failure:
        return _toolchain_failed("re-checking the target's own program", failure).note
    with torch.no_grad():
        ref = memory_stage("run", lambda: build_reference(config, sample.seed)(
            *to_torch(flat, config, torch.float64)))
        eager = memory_stage("run", lambda: build(config, sample.seed)(*to_torch(flat, config)))
    return not compare(ref.numpy(), eager.numpy(), got, tolerance).ok


def _toolchain_failed(doing: str, failure: StageFailure) -> Localization:

    line = first_error_line(failure.message)
    return _not_found(f"{failure.stage} failed while {doing}: {failure.error_type}: {line}",
                      stage=str(failure.stage), error_type=failure.error_type)


def _instrument(graph_module: Any) -> tuple[Any, list[_Probe], int]:
    """Make every observable intermediate (``_observable``) an extra output of
    ``graph_module`` (from ``ExportedProgram.module()``, whose outputs are a
    flat tuple). Returns the module, its probes in topological order, and the
    original output count."""
    import torch
    import torch.utils._pytree as pytree

    graph = graph_module.graph
    output = next(n for n in graph.nodes if n.op == "output")
    originals = tuple(output.args[0])
    observed = _observable(graph)
    extra = [n for n in observed if n not in originals]
    position = {n: k for k, n in enumerate((*originals, *extra)) if isinstance(n, torch.fx.Node)}
    probes = [_Probe(n.name, position[n], culprit_name(n), exact=not _is_float_value(n))
              for n in observed]
    output.args = ((*originals, *extra),)
    codegen = graph._codegen
    codegen.pytree_info = codegen.pytree_info._replace(
        out_spec=pytree.tree_structure(tuple(range(len(originals) + len(extra)))))
    graph_module.recompile()
    return graph_module, probes, len(originals)


def _observable(graph: Any) -> list[Any]:
    """The nodes worth observing, in topological order: every floating-point
    op result, and every integer or boolean one that is used and computed from
    the inputs. Unused ones are the auxiliary outputs of ``embedding_bag``
    (offset2bag, bag sizes, max indices): scratch whose values and even shapes
    are the kernel's own business (eager's offset2bag is empty in sum mode),
    not the program's. Input-independent ones are constants (the lifted index
    lists of the dot interaction): nothing sample-dependent to see, and one
    output more for every program to carry."""
    from_inputs: set[Any] = set()
    observed = []
    for node in graph.nodes:
        if node.op == "placeholder" or any(a in from_inputs for a in node.all_input_nodes):
            from_inputs.add(node)
        if _is_float_value(node) or (_is_index_value(node) and node.users and node in from_inputs):
            observed.append(node)
    return observed


def _tensor_result(node: Any) -> Any:
    """The tensor a ``call_function`` node produces (its fake value), else None."""
    import torch

    value = node.meta.get("val")
    return value if node.op == "call_function" and isinstance(value, torch.Tensor) else None


def _is_float_value(node: Any) -> bool:
    value = _tensor_result(node)
    return value is not None and value.dtype.is_floating_point


def _is_index_value(node: Any) -> bool:
    """An integer or boolean tensor (index arithmetic, masks), judged exactly."""
    value = _tensor_result(node)
    return value is not None and not value.dtype.is_floating_point and not value.dtype.is_complex


def _reference(graph_module: Any, args: tuple[Any, ...],
               config: Any) -> tuple[list[np.ndarray], list[np.ndarray]] | str:
    """Every output of the instrumented graph evaluated eagerly in float64 (the
    reference) and float32 (for the slack term), or why that is impossible
    (quantized tables keep packed uint8 rows that have no float64 kernel)."""
    import torch

    from fuzz.model.dlrm import to_numpy

    def to64(value: Any) -> Any:  # float inputs (dense, per-sample weights, weights) only
        if isinstance(value, (list, tuple)):  # nested as the export's arguments are
            return type(value)(to64(v) for v in value)
        return value.to(torch.float64) if isinstance(value, torch.Tensor) \
            and value.is_floating_point() else value

    try:
        with torch.no_grad():
            eager32 = memory_stage("run", lambda: to_numpy(graph_module(*args)))
            with warnings.catch_warnings():  # torch's own TreeSpec deprecation, on copy
                warnings.simplefilter("ignore", FutureWarning)
                twin = _in_float64(copy.deepcopy(graph_module).to(torch.float64))
            ref64 = memory_stage("run", lambda: to_numpy(twin(*(to64(a) for a in args))))
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        if not any(config.table_kind(k) == "quantized" for k in range(config.num_tables)):
            raise
        return f"the float64 evaluation of the intermediates failed (quantized tables): {exc}"[:500]
    quantized = any(config.table_kind(k) == "quantized" for k in range(config.num_tables))
    # A quantized kernel's float32 (integer intermediates are exact in any evaluation).
    if quantized and any(r.dtype.kind == "f" and r.dtype != np.float64 for r in ref64):
        return "no float64 reference for the intermediates (quantized tables answer in float32)"
    # Upstream's QR quotient divides in torch's default float32 in every
    # evaluation (index / c): that intermediate is float32 in the twin too, and exact.
    return [r.astype(np.float64) if r.dtype == np.float32 else r for r in ref64], eager32


def _in_float64(twin: Any) -> Any:
    """A float16/bfloat16 model's graph converts its inputs and output
    (``aten.to.dtype``) and asserts their dtypes: in the float64 twin those
    conversions go to float64 and the assertions go, so it computes in float64
    throughout (its inputs unrounded: a difference far inside the tolerance)."""
    import torch

    floats = (torch.float16, torch.bfloat16, torch.float32)
    changed = False
    for node in list(twin.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch.ops.aten._assert_tensor_metadata.default:
            twin.graph.erase_node(node)
            changed = True
        elif node.target is torch.ops.aten.to.dtype and node.args[1] in floats:
            node.args = (node.args[0], torch.float64, *node.args[2:])
            changed = True
    if changed:
        twin.recompile()
    return twin

