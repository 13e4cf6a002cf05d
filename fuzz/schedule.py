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
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from fuzz.sample import Sample
from fuzz.targets import Target

__all__ = ["Scheduler", "CellRecord", "FeatureRecord"]

Cell = tuple[str, tuple[str, ...]]


@dataclass
class CellRecord:
    """What one cell did: offers, runs, and its streak of identical known outcomes."""

    offered: int = 0
    run: int = 0
    skipped_in_row: int = 0
    streak: int = 0
    last: frozenset[str] | None = None


@dataclass
class FeatureRecord:
    """What every run of one feature in one program group did: how many, and
    the one outcome they all had (``mixed`` once two differed or one passed)."""

    runs: int = 0
    outcome: frozenset[str] | None = None
    mixed: bool = False

    def add(self, outcome: frozenset[str]) -> None:
        self.runs += 1
        if "PASS" in outcome or (self.outcome is not None and outcome != self.outcome):
            self.mixed = True
        self.outcome = outcome

    def doomed(self, known: set[str]) -> bool:
        """Whether runs with this feature always landed in the same known buckets."""
        return self.runs >= 2 and not self.mixed and self.outcome is not None \
            and self.outcome <= known


@dataclass
class Scheduler:
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

    def choose(self, sample: Sample, targets: Sequence[Target]) -> list[Target]:
        """The targets to run ``sample`` on: whole program groups, in order."""
        decided: dict[Cell, bool] = {}
        draw = self._random.random()
        for target in targets:
            cell = self.cell(target, sample)
            if cell not in decided:
                record = self.cells.setdefault(cell, CellRecord())
                record.offered += 1
                run = draw < self.chance(record, self.groups.get(cell[0]), self.doomed_runs(cell))
                record.run += run
                record.skipped_in_row = 0 if run else record.skipped_in_row + 1
                decided[cell] = run
        return [t for t in targets if decided[self.cell(t, sample)]]

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
            group.last = now

    def allocation(self) -> list[tuple[str, int, int, int]]:
        """Per program group: (group, cells, samples offered, samples run)."""
        groups: dict[str, Counter[str]] = {}
        for (group, _), record in self.cells.items():
            counts = groups.setdefault(group, Counter())
            counts.update(cells=1, offered=record.offered, run=record.run)
        return [(group, c["cells"], c["offered"], c["run"]) for group, c in sorted(groups.items())]
