"""Minimize a failing sample: a greedy, structured reducer over ``fuzz.triage.edits``.

The predicate ("does this candidate still fail the same way?") is a real
compile, 0.2-3 s each, so the reducer spends it where it buys the most: the
big cuts first (whole tables, batches, examples, in halves and then one at a
time, as delta debugging does), then knobs back to their defaults, then bag
contents, then sizes (rows, widths, MLP layers), and values toward zero last.
A candidate is tried only when it is strictly smaller by ``size_key`` and its
content has not been tried before, and it is kept only when the predicate
still holds, so the result always fails exactly as the input did. In the
knobs pass a candidate is not tried either when it keeps only knobs that a
candidate which lost the fault kept too: the reducer takes a fault's need of
its knobs to be monotone (what a reset of knob set S loses, a reset of any
superset of S loses), so its fixpoint is one-minimal in the knobs under that
assumption; it halves the knob steps of a fault that needs three or four. This
module is the loop (``shrink``: offer candidates, keep the first that still
fails, stop at a fixpoint, the budget or the step limit) and its record
(``ShrinkResult``); the passes and their order are
``fuzz.triage.shrink_passes``.

With a ``region`` (``fuzz.model.focus.Focus``: ``dlrm-fuzz run --focus`` or
``--config``) no candidate outside it is ever tried: the skeleton is built
from the edits that keep the sample inside, the knobs pass leaves the pinned
knobs alone, and every other candidate outside is dropped before it costs a
compile. A ``--config`` region pins every field, so its cases keep their
architecture and shrink in batches, examples, bags and values only.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal

from fuzz.model.focus import Focus
from fuzz.model.sample import Sample
from fuzz.triage import edits
from fuzz.triage.shrink_passes import PASSES, Candidates, passes_for

__all__ = ["shrink", "ShrinkResult", "StepRejected", "PASSES", "check_reducer_arguments"]

Stopped = Literal["fixpoint", "budget", "max_steps"]


class StepRejected(Exception):
    """Raised by a predicate that could not judge a candidate at all (the
    pipeline refused the edited sample for a reason of its own, or a bug of
    ours hit it): the step is rejected and counted, and shrinking goes on."""


@dataclass(frozen=True)
class ShrinkResult:
    """The smallest failing sample found, and what finding it cost."""

    sample: Sample
    steps_tried: int
    steps_accepted: int
    seconds: float
    size_before: dict[str, int]
    size_after: dict[str, int]
    stopped: Stopped
    steps_rejected: int = 0
    rejections: tuple[str, ...] = ()  # why the first few rejected steps were
    # Per pass that offered a step: [steps tried, accepted, seconds]; where a
    # slow shrink spends its time, so the passes can be ordered by evidence.
    by_pass: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (the sample itself is stored by the corpus)."""
        return {"steps_tried": self.steps_tried, "steps_accepted": self.steps_accepted,
                "steps_rejected": self.steps_rejected,
                **({"rejections": list(self.rejections)} if self.rejections else {}),
                **({"by_pass": {name: [int(t), int(a), round(s, 3)]
                                for name, (t, a, s) in self.by_pass.items()}}
                   if self.by_pass else {}),
                "seconds": round(self.seconds, 3), "size_before": dict(self.size_before),
                "size_after": dict(self.size_after), "stopped": self.stopped,
                "config": self.sample.config.to_dict(), "seed": self.sample.seed,
                "describe": self.sample.describe()}


# -- the reducer -----------------------------------------------------------
class _Stop(Exception):
    def __init__(self, why: Stopped) -> None:
        self.why = why


# A predicate over several candidates at once: one judgement per candidate
# (True: still failing; a StepRejected: could not judge it), judged side by
# side (one worker each), the first True in order winning.
ManyPredicate = Callable[[list[Sample]], list["bool | StepRejected"]]


class _Reducer:
    def __init__(self, sample: Sample, still_failing: Callable[[Sample], bool], budget_s: float,
                 max_steps: int | None, on_progress: Callable[[Sample], None] | None,
                 many: ManyPredicate | None = None, width: "int | Callable[[], int]" = 1,
                 region: Focus | None = None) -> None:
        self.current = sample
        # A stored case from outside the region (a replayed corpus) shrinks as before.
        self.region = region if region is not None and region.holds(sample) else None
        self.key = edits.size_key(sample)
        self.still_failing = still_failing
        self.many = many
        # Candidates side by side: asked before every batch when a callable
        # (the workers free now: none of a step's candidates waits for one).
        self.width: Callable[[], int] = (lambda: 1) if many is None else \
            width if callable(width) else (lambda: width)
        self.deadline = time.monotonic() + budget_s
        self.max_steps = max_steps
        self.on_progress = on_progress
        self.tried: set[str] = {edits.content_hash(sample)}
        self.steps_tried = 0
        self.steps_accepted = 0
        self.steps_rejected = 0
        self.rejections: list[str] = []
        self.by_pass: dict[str, list[float]] = {}
        self.pass_name = ""
        # The knobs left on in each knobs-pass candidate that lost the fault
        # (``_knobs_implied_lost``).
        self.knobs_lost: list[frozenset[tuple[str, str]]] = []

    def _fresh(self, candidate: Sample | None) -> bool:
        """Worth a step: strictly smaller than the current sample, never
        tried, inside the region, and (in the knobs pass) not implied lost."""
        return candidate is not None and edits.size_key(candidate) < self.key and \
            edits.content_hash(candidate) not in self.tried and \
            (self.region is None or self.region.holds(candidate)) and \
            not (self.pass_name == "knobs" and self._knobs_implied_lost(candidate))

    def _knobs_implied_lost(self, candidate: Sample) -> bool:
        """Whether a knobs candidate keeps only knobs that a candidate which
        lost the fault kept too (a subset of its knobs, on a sample no larger):
        a fault that needs a knob is lost by every reset that includes it, so
        after one reset of a group loses it, no later candidate resetting
        what is left of that group needs a compile. Without this, ddmin's
        halves and quarters start again from every accepted candidate and
        fail again on the knobs the fault needs: 13 rounds of two compiles
        for four needed knobs of nine, 6.5 with it (simulated; one needed
        knob: 5 rounds, 4). A lost record whose knobs the current sample
        keeps none beyond is not evidence here (the fault came back with
        fewer knobs), so it is passed over."""
        current = _knobs_on(self.current)
        kept = _knobs_on(candidate)
        return any(kept <= lost and not current <= lost for lost in self.knobs_lost)

    def _judge_one(self, candidate: Sample) -> "bool | StepRejected":
        try:
            return self.still_failing(candidate)
        except StepRejected as rejected:
            return rejected

    def offer(self, batch: list[Sample]) -> bool:
        """Try candidates of one pass side by side; True when one of them (the
        first in order that still fails) became the current sample."""
        if self.max_steps is not None:
            if self.steps_tried >= self.max_steps:
                raise _Stop("max_steps")
            batch = batch[:self.max_steps - self.steps_tried]
        if time.monotonic() >= self.deadline:
            raise _Stop("budget")
        self.tried.update(edits.content_hash(c) for c in batch)
        self.steps_tried += len(batch)
        began = time.monotonic()
        judged = self.many(batch) if self.many is not None and len(batch) > 1 \
            else [self._judge_one(c) for c in batch]
        spent = self.by_pass.setdefault(self.pass_name, [0, 0, 0.0])
        spent[0] += len(batch)
        spent[2] += time.monotonic() - began
        winner = None
        for candidate, judgement in zip(batch, judged):
            if isinstance(judgement, StepRejected):
                self.steps_rejected += 1
                if len(self.rejections) < 3:  # the first few say why, for the record
                    self.rejections.append(str(judgement)[:300])
            elif judgement and winner is None:
                winner = candidate
            elif not judgement and winner is None and self.pass_name == "knobs":
                # (one after the winner may be unjudged: a many-predicate
                # need not judge past the first that holds)
                self.knobs_lost.append(_knobs_on(candidate))
        if winner is None:
            return False
        self.current, self.key = winner, edits.size_key(winner)
        self.steps_accepted += 1
        spent[1] += 1
        if self.on_progress is not None:
            self.on_progress(winner)
        return True

    def run_pass(self, generate: Callable[[Sample], Candidates]) -> bool:
        """Run one pass to its own fixpoint; True when anything was accepted."""
        progressed = False
        while self._step_through(generate(self.current)):
            progressed = True
        return progressed

    def _step_through(self, candidates: Candidates) -> bool:
        """Offer fresh candidates ``width`` at a time until one is accepted."""
        batch: list[Sample] = []
        hashes: set[str] = set()
        width = max(1, self.width())
        for candidate in candidates:
            if candidate is None or not self._fresh(candidate):
                continue
            digest = edits.content_hash(candidate)
            if digest in hashes:
                continue
            batch.append(candidate)
            hashes.add(digest)
            if len(batch) >= width:
                if self.offer(batch):
                    return True
                batch, hashes, width = [], set(), max(1, self.width())
        return bool(batch) and self.offer(batch)

    def run(self) -> Stopped:
        try:
            while True:
                progressed = False
                for self.pass_name, generate in passes_for(self.region):
                    progressed |= self.run_pass(generate)
                if not progressed:
                    return "fixpoint"
        except _Stop as stop:
            return stop.why


def _knobs_on(sample: Sample) -> frozenset[tuple[str, str]]:
    """The knobs ``sample`` sets away from their defaults, as a set."""
    return frozenset((name, repr(value))
                     for name, value in edits.non_default_knobs(sample.config).items())


def check_reducer_arguments(sample: Sample, still_failing: Callable[[Sample], bool],
                            budget_s: float) -> None:
    """What every reducer (shrink, ablate) needs: a sample, a predicate, time."""
    if not isinstance(sample, Sample):
        raise TypeError(f"sample={type(sample).__name__}: must be a fuzz.model.sample.Sample")
    if not callable(still_failing):
        raise TypeError(f"still_failing={still_failing!r}: must be callable(Sample) -> bool")
    if not budget_s > 0:
        raise ValueError(f"budget_s={budget_s!r}: must be > 0 seconds")


def shrink(sample: Sample, still_failing: Callable[[Sample], bool], budget_s: float,
           max_steps: int | None = None,
           on_progress: Callable[[Sample], None] | None = None,
           many: ManyPredicate | None = None, width: "int | Callable[[], int]" = 1,
           region: Focus | None = None) -> ShrinkResult:
    """The smallest sample (by ``size_key``) reachable from ``sample`` through
    accepted edits, each of which kept ``still_failing`` true.

    ``sample`` itself is taken to fail (the caller just saw it; it is not
    re-run). ``budget_s`` bounds the wall time before each new predicate call
    (a call already running is not cut short); ``max_steps`` bounds predicate
    calls. A ``KeyboardInterrupt`` from the predicate propagates; the best
    sample so far has already gone to ``on_progress``. With ``many`` (a
    predicate over a list) candidates of one pass are judged ``width`` at a
    time, side by side: the first of them that still fails wins, exactly as
    one at a time would have found it first, so the result is the same
    reduction reached in fewer rounds of compiles; a callable ``width`` is
    asked before each batch (the campaign's: the workers free at that
    moment). With ``region`` every
    candidate tried lies inside it (when ``sample`` does; module docstring).
    """
    check_reducer_arguments(sample, still_failing, budget_s)
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 0):
        raise ValueError(f"max_steps={max_steps!r}: must be None or an integer >= 0")
    if not callable(width) and (isinstance(width, bool) or not isinstance(width, int)
                                or width < 1):
        raise ValueError(f"width={width!r}: must be an integer >= 1 (candidates side by side) "
                         f"or a callable giving one before each batch")
    if region is not None and not isinstance(region, Focus):
        raise TypeError(f"region={region!r}: must be a fuzz.model.focus.Focus or None")
    return _shrink(sample, still_failing, budget_s, max_steps, on_progress, many, width, region)


def _shrink(sample: Sample, still_failing: Callable[[Sample], bool], budget_s: float,
            max_steps: int | None, on_progress: Callable[[Sample], None] | None,
            many: ManyPredicate | None, width: "int | Callable[[], int]",
            region: Focus | None) -> ShrinkResult:
    start = time.monotonic()
    reducer = _Reducer(sample, still_failing, budget_s, max_steps, on_progress, many, width,
                       region)
    stopped = reducer.run()
    return ShrinkResult(sample=reducer.current, steps_tried=reducer.steps_tried,
                        steps_accepted=reducer.steps_accepted,
                        seconds=time.monotonic() - start,
                        size_before=edits.sample_size(sample),
                        size_after=edits.sample_size(reducer.current), stopped=stopped,
                        steps_rejected=reducer.steps_rejected,
                        rejections=tuple(reducer.rejections), by_pass=reducer.by_pass)
