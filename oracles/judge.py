"""Judges one target's result for a sample against the eager references."""

from __future__ import annotations

from oracles.classify import classify
from oracles.compare import Tolerance, compare
from oracles.results import Stage, TargetResult
from oracles.verdict import Outcome, Verdict

__all__ = ["judge", "ReferenceFailed", "reference_failed"]

_DETAIL_CHARS = 8000


class ReferenceFailed(RuntimeError):
    """Eager PyTorch could not evaluate the sample: the sample is ours to fix,
    unless ``out_of_memory``: then it is too big for a worker's memory cap
    (a limit of the machine: the sample is skipped, not a bug of anyone's)."""

    def __init__(self, message: str, out_of_memory: bool = False) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory


def reference_failed(ref: TargetResult) -> ReferenceFailed:
    """The error for a reference (eager float64 or float32) that failed."""
    assert ref.failure is not None
    return ReferenceFailed(f"{ref.target} failed in {ref.failure.stage}: "
                           f"{ref.failure.error_type}: {ref.failure.message[:300]}",
                           out_of_memory=ref.failure.error_type == "MemoryError")


def judge(result: TargetResult, reference: TargetResult, eager: TargetResult,
          tolerance: Tolerance = Tolerance()) -> Outcome:
    """One target's verdict for a sample: its failure classified, or its outputs checked."""
    for ref in (reference, eager):
        if ref.failure is not None:
            raise reference_failed(ref)
    if result.failure is not None:
        failure = result.failure
        verdict, line, op = classify(failure)
        detail = failure.message[-_DETAIL_CHARS:]
        if failure.stderr_tail:
            detail += "\n--- worker stderr (tail) ---\n" + failure.stderr_tail
        numbers = {"signal": failure.signal} if failure.signal else {}
        return Outcome(result.target, verdict, failure.stage, line, detail, op, numbers,
                       dict(result.timings))
    worst: float | None = None  # a pass's margin: the worst error / bound over its batches
    for b, got in enumerate(result.outputs):
        if got is None:  # a static target skips batches of other shapes
            continue
        ref64, eager32 = reference.outputs[b], eager.outputs[b]
        assert ref64 is not None and eager32 is not None
        rounding = reference.roundings[b] if b < len(reference.roundings) else None
        comparison = compare(ref64, eager32, got, tolerance, rounding)
        if not comparison.ok:
            numbers = dict(comparison.numbers, batch=b)
            return Outcome(result.target, Verdict.MISMATCH, Stage.RUN, comparison.reason, "", None,
                           numbers, dict(result.timings))
        ratio = comparison.numbers["worst_error_to_bound"]
        worst = ratio if worst is None else max(worst, ratio)
    margin = {} if worst is None else {"worst_error_to_bound": worst}
    return Outcome(result.target, Verdict.PASS, Stage.RUN, numbers=margin,
                   timings=dict(result.timings))
