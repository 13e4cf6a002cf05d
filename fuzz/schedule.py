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
- No cell is skipped more than ``every - 1`` times in a row, so a fix (the
  cell passing, or failing differently) is noticed within ``every`` offers.

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

__all__ = ["Scheduler", "CellRecord"]

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
class Scheduler:
    seed: int = 0
    floor: float = 1 / 8
    new_floor: float = 1 / 4
    every: int = 8
    cells: dict[Cell, CellRecord] = field(default_factory=dict)
    # Per program group, its streak over all its cells (the new cells' prior).
    groups: dict[str, CellRecord] = field(default_factory=dict)

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

    def chance(self, record: CellRecord, group: CellRecord | None = None) -> float:
        """The probability of running a cell with this record (in a program
        group with the record ``group``)."""
        if record.skipped_in_row >= self.every - 1:
            return 1.0
        if record.run == 0:
            if group is None or group.streak < 2:
                return 1.0
            return max(self.new_floor, 0.5 ** (group.streak - 1))
        if record.streak < 2:
            return 1.0
        return max(self.floor, 0.5 ** (record.streak - 1))

    def choose(self, sample: Sample, targets: Sequence[Target]) -> list[Target]:
        """The targets to run ``sample`` on: whole program groups, in order."""
        decided: dict[Cell, bool] = {}
        for target in targets:
            cell = self.cell(target, sample)
            if cell not in decided:
                record = self.cells.setdefault(cell, CellRecord())
                record.offered += 1
                run = self._random.random() < self.chance(record, self.groups.get(cell[0]))
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
        for cell, outcome in landed.items():
            now = frozenset(outcome)
            only_known = "PASS" not in now and now <= known
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
