"""Minimize a failing sample: a greedy, structured reducer over ``fuzz.triage.edits``.

The predicate ("does this candidate still fail the same way?") is a real
compile, 0.2-3 s each, so the reducer spends it where it buys the most: the
big cuts first (whole tables, batches, examples, in halves and then one at a
time, as delta debugging does), then knobs back to their defaults, then bag
contents, then sizes (rows, widths, MLP layers), and values toward zero last.
A candidate is tried only when it is strictly smaller by ``size_key`` and its
content has not been tried before, and it is kept only when the predicate
still holds, so the result always fails exactly as the input did.

With a ``region`` (``fuzz.model.focus.Focus``: ``dlrm-fuzz run --focus`` or
``--config``) no candidate outside it is ever tried: the skeleton is built
from the edits that keep the sample inside, the knobs pass leaves the pinned
knobs alone, and every other candidate outside is dropped before it costs a
compile. A ``--config`` region pins every field, so its cases keep their
architecture and shrink in batches, examples, bags and values only.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence

from fuzz.triage import edits
from fuzz.model.focus import Focus
from fuzz.model.sample import Sample

__all__ = ["shrink", "ShrinkResult", "StepRejected", "PASSES", "check_reducer_arguments"]

Stopped = Literal["fixpoint", "budget", "max_steps"]
Candidates = Iterator["Sample | None"]


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (the sample itself is stored by the corpus)."""
        return {"steps_tried": self.steps_tried, "steps_accepted": self.steps_accepted,
                "steps_rejected": self.steps_rejected,
                **({"rejections": list(self.rejections)} if self.rejections else {}),
                "seconds": round(self.seconds, 3), "size_before": dict(self.size_before),
                "size_after": dict(self.size_after), "stopped": self.stopped,
                "config": self.sample.config.to_dict(), "seed": self.sample.seed,
                "describe": self.sample.describe()}


# -- candidate generators, one per pass ------------------------------------
def _removals(count: int) -> Iterator[list[int]]:
    """Position sets to remove, delta-debugging style: halves, quarters, ...,
    then single positions (last first: drawn data puts the simple cases first)."""
    size = count // 2
    while size > 1:
        for start in range(0, count, size):
            yield list(range(start, min(start + size, count)))
        size //= 2
    for p in reversed(range(count)):
        yield [p]


def _keeping(count: int) -> Iterator[list[int]]:
    for removed in _removals(count):
        yield [p for p in range(count) if p not in removed]


def _tables(s: Sample) -> Candidates:
    for keep in _keeping(s.config.num_tables):
        yield edits.keep_tables(s, keep)


def _batches(s: Sample) -> Candidates:
    for keep in _keeping(len(s.batches)):
        yield edits.keep_batches(s, keep)


def _examples(s: Sample) -> Candidates:
    for b, batch in enumerate(s.batches):
        for keep in _keeping(batch.batch_size):
            yield edits.keep_examples(s, b, keep)


def _knobs(s: Sample, region: Focus | None = None) -> Candidates:
    """Knobs back to their defaults, halves of the set first: a case that
    needs one knob of eight then costs about four steps instead of eight.
    The knobs ``region`` pins are left out of the set."""
    pinned = region.pinned if region is not None else {}
    names = [name for name in edits.non_default_knobs(s.config) if name not in pinned]
    for removed in _removals(len(names)):
        yield edits.knobs_to_default(s, [names[i] for i in removed])


def _bags(s: Sample) -> Candidates:
    """Whole tables' bags emptied, then chunks of bags, then single indices."""
    for b, batch in enumerate(s.batches):
        for k in range(s.config.num_tables):
            full = [r for r, n in enumerate(batch.bag_lengths(k)) if n]
            for removed in _removals(len(full)):
                yield edits.empty_bags_of(s, b, k, [full[i] for i in removed])
    for b, batch in enumerate(s.batches):
        for k in range(s.config.num_tables):
            for row, n in enumerate(batch.bag_lengths(k)):
                for removed in _removals(int(n)):
                    yield edits.keep_bag_indices(s, b, k, row,
                                                 [p for p in range(int(n)) if p not in removed])


def _used_rows(s: Sample, k: int) -> int:
    top = [int(batch.indices[k].max()) for batch in s.batches if batch.indices[k].size]
    return max(top, default=0) + 1


def _toward(value: int, floor: int = 1) -> list[int]:
    """Smaller values to try for ``value``: the floor, the half, one less."""
    return sorted({v for v in (floor, value // 2, value - 1) if floor <= v < value})


def _unused_rows(s: Sample) -> Candidates:
    """Every table cut to the rows its bags use: early, because a big table
    inlined as a constant makes every later step's export, lowering and
    compile slow (a 1-table case with a large table took ~20 s a step)."""
    for k in range(s.config.num_tables):
        yield edits.fewer_rows(s, k, _used_rows(s, k))


def _rows(s: Sample) -> Candidates:
    for k, rows in enumerate(s.config.ln_emb):
        yield edits.fewer_rows(s, k, _used_rows(s, k))
        for target in _toward(rows):
            yield edits.fewer_rows(s, k, target)


def _widths(s: Sample) -> Candidates:
    config = s.config
    for width in _toward(config.base_width) + _toward(config.base_width, floor=2):
        yield edits.narrow_m_spa(s, width)
    if isinstance(config.m_spa, tuple):
        for k, width in enumerate(config.m_spa):
            for target in _toward(width):
                yield edits.narrow_table_width(s, k, target)
    for removed in _removals(config.num_dense):
        yield edits.drop_dense_columns(s, removed)


def _mlps(s: Sample) -> Candidates:
    mlp: edits.MLP
    for mlp in ("bot", "top"):
        widths = s.config.ln_bot if mlp == "bot" else s.config.ln_top
        for i in range(1, len(widths) - 1):
            yield edits.drop_hidden(s, mlp, i)
    for mlp in ("bot", "top"):
        widths = s.config.ln_bot if mlp == "bot" else s.config.ln_top
        for i in range(1, len(widths) - (1 if mlp == "bot" else 0)):
            for target in _toward(widths[i]):
                yield edits.narrow_layer(s, mlp, i, target)


def _values(s: Sample) -> Candidates:
    yield edits.zero_indices(s)
    for k in range(s.config.num_tables):
        yield edits.zero_indices(s, k=k)
    yield edits.halve_indices(s)
    yield edits.zero_dense(s)
    for b, batch in enumerate(s.batches):
        yield edits.zero_dense(s, b=b)
        for col in range(s.config.num_dense):
            yield edits.zero_dense(s, b=b, col=col)
        for row in range(batch.batch_size):
            yield edits.zero_dense(s, b=b, row=row)
    yield edits.round_dense(s)
    yield edits.unit_weights(s)
    yield edits.with_seed(s, 0)


def _skeleton(s: Sample, k: int, empty: bool, region: Focus | None = None) -> Sample | None:
    """The bottom of the lattice for table ``k``, built without a single
    predicate call: that table alone (its kind kept: a QR, MD or quantized
    table keeps the rows that make it one), one batch, one example whose bag
    holds one index 0 (or nothing, with ``empty``), the narrowest widths, no
    hidden layers, one dense column, zero values, seed 0; every knob kept.
    An edit that does not apply, or would leave ``region``, is passed over;
    ``None`` when nothing changed."""
    kind = s.config.table_kind(k)
    out = s

    def apply(edit: edits.Edit) -> None:
        nonlocal out
        new = edit(out)
        if new is not None and (region is None or region.holds(new)):
            out = new

    apply(lambda x: edits.keep_tables(x, [k]))
    apply(lambda x: edits.keep_batches(x, [0]))
    lengths = out.batches[0].bag_lengths(0)
    row = 0 if empty else next((r for r, n in enumerate(lengths) if n), 0)
    apply(lambda x: edits.keep_examples(x, 0, [row]))
    if empty:
        apply(lambda x: edits.empty_bags_of(x, 0, 0, [0]))
    else:
        apply(lambda x: edits.keep_bag_indices(x, 0, 0, 0, [0]))
    apply(edits.zero_indices)
    config = out.config
    floors = {1, 2, config.qr_threshold + 1, config.md_threshold + 1,
              (config.padding_idx or 0) + 1}
    for rows in sorted(floors):
        cut = edits.fewer_rows(out, 0, rows)
        if cut is not None and cut.config.table_kind(0) == kind and \
                (region is None or region.holds(cut)):
            out = cut
            break
    for width in (1, 2):
        apply(lambda x: edits.narrow_m_spa(x, width))
    apply(lambda x: edits.drop_dense_columns(x, range(1, x.config.num_dense)))
    mlp: edits.MLP
    for mlp in ("bot", "top"):
        for _ in range(len(getattr(out.config, f"ln_{mlp}"))):
            apply(lambda x: edits.drop_hidden(x, mlp, 1))
        widths = getattr(out.config, f"ln_{mlp}")
        for i in range(1, len(widths)):
            for width in (1, 2):
                apply(lambda x: edits.narrow_layer(x, mlp, i, width))
    for edit in (edits.zero_dense, edits.unit_weights, lambda x: edits.with_seed(x, 0)):
        apply(edit)
    return None if out is s else out


def _skeletons(s: Sample, region: Focus | None = None) -> Candidates:
    """Jump to the bottom first: for one table of each kind, the skeleton
    with an empty bag, then with one index. Most faults the fuzzer finds
    hang on a knob, not on the data, so one compile usually lands on the
    minimal case (or next to it), and the passes below then only confirm
    the fixpoint; when the skeleton no longer fails it cost one step."""
    firsts: dict[str, int] = {}
    for k in range(s.config.num_tables):
        firsts.setdefault(s.config.table_kind(k), k)
    for empty in (True, False):
        for k in firsts.values():
            yield _skeleton(s, k, empty, region)


PASSES: Sequence[tuple[str, Callable[[Sample], Candidates]]] = (
    ("skeleton", _skeletons), ("tables", _tables), ("unused rows", _unused_rows), ("batches", _batches),
    ("examples", _examples), ("knobs", _knobs),
    ("bags", _bags), ("rows", _rows), ("widths", _widths), ("mlps", _mlps), ("values", _values),
)
"""The passes in the order they run; each is retried from the new sample
after every accepted candidate, and the whole list until nothing is accepted."""
# The passes that know a region (the others' candidates are filtered).
_REGION_AWARE = {"skeleton": _skeletons, "knobs": _knobs}


def _passes(region: Focus | None) -> list[tuple[str, Callable[[Sample], Candidates]]]:
    """``PASSES``, the region-aware ones told about ``region``."""
    if region is None:
        return list(PASSES)
    return [(name, functools.partial(_REGION_AWARE[name], region=region)
             if name in _REGION_AWARE else generate) for name, generate in PASSES]


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
                 many: ManyPredicate | None = None, width: int = 1,
                 region: Focus | None = None) -> None:
        self.current = sample
        # A stored case from outside the region (a replayed corpus) shrinks as before.
        self.region = region if region is not None and region.holds(sample) else None
        self.key = edits.size_key(sample)
        self.still_failing = still_failing
        self.many = many
        self.width = width if many is not None else 1
        self.deadline = time.monotonic() + budget_s
        self.max_steps = max_steps
        self.on_progress = on_progress
        self.tried: set[str] = {edits.content_hash(sample)}
        self.steps_tried = 0
        self.steps_accepted = 0
        self.steps_rejected = 0
        self.rejections: list[str] = []

    def _fresh(self, candidate: Sample | None) -> bool:
        """Worth a step: strictly smaller than the current sample, never
        tried, and inside the region."""
        return candidate is not None and edits.size_key(candidate) < self.key and \
            edits.content_hash(candidate) not in self.tried and \
            (self.region is None or self.region.holds(candidate))

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
        judged = self.many(batch) if self.many is not None and len(batch) > 1 \
            else [self._judge_one(c) for c in batch]
        winner = None
        for candidate, judgement in zip(batch, judged):
            if isinstance(judgement, StepRejected):
                self.steps_rejected += 1
                if len(self.rejections) < 3:  # the first few say why, for the record
                    self.rejections.append(str(judgement)[:300])
            elif judgement and winner is None:
                winner = candidate
        if winner is None:
            return False
        self.current, self.key = winner, edits.size_key(winner)
        self.steps_accepted += 1
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
        for candidate in candidates:
            if candidate is None or not self._fresh(candidate):
                continue
            digest = edits.content_hash(candidate)
            if digest in hashes:
                continue
            batch.append(candidate)
            hashes.add(digest)
            if len(batch) == self.width:
                if self.offer(batch):
                    return True
                batch, hashes = [], set()
        return bool(batch) and self.offer(batch)

    def run(self) -> Stopped:
        try:
            while True:
                progressed = False
                for _, generate in _passes(self.region):
                    progressed |= self.run_pass(generate)
                if not progressed:
                    return "fixpoint"
        except _Stop as stop:
            return stop.why


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
           many: ManyPredicate | None = None, width: int = 1,
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
    reduction reached in fewer rounds of compiles. With ``region`` every
    candidate tried lies inside it (when ``sample`` does; module docstring).
    """
    check_reducer_arguments(sample, still_failing, budget_s)
    if max_steps is not None and (isinstance(max_steps, bool) or max_steps < 0):
        raise ValueError(f"max_steps={max_steps!r}: must be None or an integer >= 0")
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width={width!r}: must be an integer >= 1 (candidates side by side)")
    if region is not None and not isinstance(region, Focus):
        raise TypeError(f"region={region!r}: must be a fuzz.model.focus.Focus or None")
    return _shrink(sample, still_failing, budget_s, max_steps, on_progress, many, width, region)


def _shrink(sample: Sample, still_failing: Callable[[Sample], bool], budget_s: float,
            max_steps: int | None, on_progress: Callable[[Sample], None] | None,
            many: ManyPredicate | None, width: int, region: Focus | None) -> ShrinkResult:
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
                        rejections=tuple(reducer.rejections))
