"""Which targets a generated sample is sent to: less time on known failures.

Half of the default targets fail every DLRM in the same known way (TOSA and
StableHLO cannot lower ``embedding_bag``), yet a plain campaign pays their
export and lowering on every sample. The scheduler keeps, per *cell*, a
record of what happened: a cell is a lowered program group (targets sharing
one torch-mlir output type and shape mode, all decided together so the blame
rules that compare backends of one lowering keep their evidence) crossed with
the sample's feature set (``Sample.features()``: the code-path switches).

- A cell whose last outcome was anything but the same known buckets again
  (a pass, a new bucket, a change) is always run.
- A cell that landed in the same known buckets ``k >= 2`` times in a row is
  run with probability ``max(floor, 2^-(k-1))``.
- A cell never tried is always run, unless its program group as a whole
  landed in known buckets only (any of them: no pass, nothing new) ``g >= 2``
  samples in a row (on whatever cells): then with probability
  ``max(new_floor, 2^-(g-1))``. Feature sets
  are many (a campaign's 40 samples rarely repeat one), so without this a
  lowering that fails every DLRM the same way would never be skipped.
- A cell whose sample has a *doomed* feature in that program group (every
  one of its ``r >= 2`` runs there landed in the same known buckets:
  ``index_dtype=int32`` in linalg, quantized tables anywhere) is run with
  probability ``max(new_floor, 2^-(r-1))``: such a run tells little but
  whether the bug is fixed. One run with any other outcome (a pass, another
  bucket) clears the feature for good, so a feature that merely came along
  with a culprit is not held back.
- No cell is skipped more than ``every - 1`` times in a row, so a fix (the
  cell passing, or failing differently) is noticed within ``every`` offers.
- One random draw per sample decides every group (run where it falls under
  the group's probability): each group keeps its own rate, and the skips
  coincide as often as they can. Only when every group of a shape mode is
  skipped are its export and import (most of a sample's cost where lowering
  fails) saved; with a draw per group that would be rare.

Skipping is only safe because a campaign re-runs a partially scheduled sample
on every target before filing a bucket the corpus does not know (blame across
lowerings needs them all); see ``Campaign``.

Repair, don't skip (``plan``). A skip hides what is behind a known failure: a
sample whose int32 offsets doom the linalg group never reaches compile and run
there, and neither does the wrong answer its weighted bags would have shown.
So where a cell is not run and the sample has doomed features in that group,
the group gets a *repaired variant* of the sample instead (``fuzz.triage.repair``:
the doomed features switched off, the rest as drawn), decided by the variant's
own cell record; the original still runs there at the fading rate above (so a
fix is still seen), and wherever its features are not doomed. The rates are
an AFL-like power schedule: a cell's energy halves with each run in a row that
found nothing new and comes back in full with anything new. A generated sample
is never thrown away whole: when every group would skip it, the group with the
most energy runs it (one that has reached the run stage before, where a wrong
answer can show, first).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from fuzz.triage.edits import content_hash
from fuzz.triage.repair import repair
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target

__all__ = ["Scheduler", "CellRecord", "FeatureRecord", "Planned"]

Cell = tuple[str, tuple[str, ...]]


@dataclass
class CellRecord:
    """What one cell did: offers, runs, and its streak of identical known outcomes."""

    offered: int = 0
    run: int = 0
    skipped_in_row: int = 0
    streak: int = 0
    last: frozenset[str] | None = None
    passes: int = 0  # runs in which a target passed (kept on the group's record)


@dataclass
class FeatureRecord:
    """What every run of one feature in one program group did: how many, and
    the one outcome they all had (``mixed`` once two differed or one passed)."""

    runs: int = 0
    outcome: frozenset[str] | None = None
    mixed: bool = False

    def add(self, outcome: frozenset[str]) -> None:
        """Count one run's outcome; a pass or a different outcome makes it mixed."""
        self.runs += 1
        if "PASS" in outcome or (self.outcome is not None and outcome != self.outcome):
            self.mixed = True
        self.outcome = outcome

    def doomed(self, known: set[str]) -> bool:
        """Whether runs with this feature always landed in the same known buckets."""
        return self.runs >= 2 and not self.mixed and self.outcome is not None \
            and self.outcome <= known


@dataclass(frozen=True)
class Planned:
    """One part of a sample's plan: the sample (the original, or a repaired
    variant naming the features switched off) and the targets it goes to."""

    sample: Sample
    targets: list[Target]
    repairs: tuple[str, ...] = ()


@dataclass
class Scheduler:
    """Decides which targets each sample goes to, spending less on known failures."""
    seed: int = 0
    floor: float = 1 / 8
    new_floor: float = 1 / 4
    every: int = 8
    cells: dict[Cell, CellRecord] = field(default_factory=dict)
    # Per program group, its streak over all its cells (the new cells' prior).
    groups: dict[str, CellRecord] = field(default_factory=dict)
    # Per (program group, feature): every run's outcome (doomed features).
    features: dict[tuple[str, str], FeatureRecord] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)  # the known buckets record() was told of

    def __post_init__(self) -> None:
        for name in ("floor", "new_floor"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name}={getattr(self, name)}: must be in (0, 1]")
        if self.every < 1:
            raise ValueError(f"every={self.every}: must be >= 1")
        self._random = random.Random(self.seed)

    @staticmethod
    def cell(target: Target, sample: Sample) -> Cell:
        """The cell a run falls in: the target's program group and the sample's features."""
        return (target.program_group, tuple(sample.features()))

    def doomed_runs(self, cell: Cell) -> int:
        """The most runs of a doomed feature of ``cell`` in its group (0: none)."""
        group, features = cell
        records = (self.features.get((group, feature)) for feature in features)
        return max((r.runs for r in records if r is not None and r.doomed(self.known)),
                   default=0)

    def chance(self, record: CellRecord, group: CellRecord | None = None,
               doomed_runs: int = 0) -> float:
        """The probability of running a cell with this record (in a program
        group with the record ``group``; ``doomed_runs`` from ``doomed_runs``)."""
        if record.skipped_in_row >= self.every - 1:
            return 1.0

        def fading(evidence: int, floor: float) -> float:
            return 1.0 if evidence < 2 else max(floor, 0.5 ** (evidence - 1))

        prior = group.streak if group is not None and record.run == 0 else 0
        return min(fading(record.streak, self.floor), fading(prior, self.new_floor),
                   fading(doomed_runs, self.new_floor))

    def doomed_features(self, cell: Cell) -> list[str]:
        """The features of ``cell`` doomed in its group, in the cell's order."""
        group, features = cell
        return [f for f in features if (record := self.features.get((group, f))) is not None
                and record.doomed(self.known)]

    def plan(self, sample: Sample, targets: Sequence[Target]) -> list[Planned]:
        """Where ``sample`` goes: per program group the original (at its
        cell's rate), else a repaired variant without the features doomed in
        that group (at the variant cell's rate), else nothing; never nothing
        at all (see the module's docstring). Parts with the same sample are
        merged; targets keep their order."""
        groups: dict[str, list[Target]] = {}
        for target in targets:
            groups.setdefault(target.program_group, []).append(target)
        draw = self._random.random()
        chosen: dict[str, tuple[Sample, tuple[str, ...]]] = {}
        best: tuple[float, bool, str, Sample, tuple[str, ...]] | None = None
        for group in groups:
            cell = (group, tuple(sample.features()))
            record = self.cells.setdefault(cell, CellRecord())
            record.offered += 1
            odds = self.chance(record, self.groups.get(group), self.doomed_runs(cell))
            options: list[tuple[float, float, Sample, tuple[str, ...], CellRecord]] = [
                (odds, draw, sample, (), record)]
            doomed = self.doomed_features(cell) if draw >= odds else []
            fixed = repair(sample, doomed) if doomed else None
            if fixed is not None:
                variant, repairs = fixed
                vcell = (group, tuple(variant.features()))
                vrecord = self.cells.setdefault(vcell, CellRecord())
                vrecord.offered += 1
                vodds = self.chance(vrecord, self.groups.get(group), self.doomed_runs(vcell))
                options.append((vodds, self._random.random(), variant, repairs, vrecord))
            for odds_, draw_, part, repairs_, rec in options:
                if draw_ < odds_:
                    chosen[group] = (part, repairs_)
                    break
            for odds_, _, part, repairs_, rec in options:
                if group in chosen and chosen[group][0] is part:
                    rec.run += 1
                    rec.skipped_in_row = 0
                else:
                    rec.skipped_in_row += 1
                reached = self._reached_run(group)
                if best is None or (odds_, reached) > best[:2]:
                    best = (odds_, reached, group, part, repairs_)
        if not chosen and best is not None:  # never thrown away whole
            _, _, group, part, repairs_ = best
            chosen[group] = (part, repairs_)
            rec = self.cells[(group, tuple(part.features()))]
            rec.run += 1
            rec.skipped_in_row = 0
        return self._merged(chosen, groups)

    def _reached_run(self, group: str) -> bool:
        """Whether any run of ``group`` passed: its programs compile and run,
        so a wrong answer can show there."""
        record = self.groups.get(group)
        return record is not None and record.passes > 0

    @staticmethod
    def _merged(chosen: dict[str, tuple[Sample, tuple[str, ...]]],
                groups: dict[str, list[Target]]) -> list[Planned]:
        parts: list[Planned] = []
        for group, (part, repairs) in chosen.items():
            same = next((p for p in parts if p.sample is part or
                         content_hash(p.sample) == content_hash(part)), None)
            if same is None:
                parts.append(Planned(part, list(groups[group]), repairs))
            else:
                same.targets.extend(groups[group])
        order = {id(t): i for i, t in enumerate(t for ts in groups.values() for t in ts)}
        for p in parts:
            p.targets.sort(key=lambda t: order[id(t)])
        return parts

    def choose(self, sample: Sample, targets: Sequence[Target]) -> list[Target]:
        """The targets ``plan`` sends the original ``sample`` to (its repaired
        variants' parts left out): whole program groups, in order."""
        return [t for part in self.plan(sample, targets) if part.sample is sample
                for t in part.targets]

    def record(self, sample: Sample, ran: Iterable[Target], buckets: Mapping[str, str],
               known: set[str]) -> None:
        """What the targets that ran did: ``buckets`` maps a failing target's
        name to its bucket (a target not in it passed); ``known``: buckets the
        corpus had before this sample."""
        landed: dict[Cell, set[str]] = {}
        for target in ran:
            landed.setdefault(self.cell(target, sample), set()).add(
                buckets.get(target.name, "PASS"))
        self.known |= known
        for cell, outcome in landed.items():
            now = frozenset(outcome)
            only_known = "PASS" not in now and now <= known
            for feature in cell[1]:
                self.features.setdefault((cell[0], feature), FeatureRecord()).add(now)
            record = self.cells.setdefault(cell, CellRecord())
            record.streak = record.streak + 1 if only_known and now == record.last else int(only_known)
            record.last = now
            # A group's streak counts samples with nothing but known buckets,
            # whichever: a lowering that rejects every DLRM names a different
            # unsupported op from sample to sample.
            group = self.groups.setdefault(cell[0], CellRecord())
            group.streak = group.streak + 1 if only_known else 0
            group.passes += "PASS" in now
            group.last = now

    def allocation(self) -> list[tuple[str, int, int, int]]:
        """Per program group: (group, cells, samples offered, samples run)."""
        groups: dict[str, Counter[str]] = {}
        for (group, _), record in self.cells.items():
            counts = groups.setdefault(group, Counter())
            counts.update(cells=1, offered=record.offered, run=record.run)
        return [(group, c["cells"], c["offered"], c["run"]) for group, c in sorted(groups.items())]
