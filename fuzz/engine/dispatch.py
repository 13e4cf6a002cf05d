"""How one sample's jobs go to the pool and come back: ``InFlight`` holds a
sample's jobs (the two references first, then its targets) and fills in their
answers in any order; ``CUT`` is the answer of a job dropped before it
started; ``dispatch_order`` and ``leaders`` order a sample's targets so that
the targets sharing an import, a program or an artifact reuse the first one's
work from the artifact cache. Apart from the session so that the order of
jobs, and what a sample in flight is, live in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target

__all__ = ["CUT", "Cut", "InFlight", "dispatch_order", "leaders"]


@dataclass(eq=False)
class InFlight:
    """One sample's jobs: references first, then ``ordered`` targets; answers
    fill in as they finish, in any order."""

    sample: Sample
    ordered: list[Target]
    index: int | None  # the generated sample's number; None: checked at once
    answers: list[Any]
    left: int = 0
    partial: bool = False  # the scheduler left some targets out
    repairs: tuple[str, ...] = ()  # a repaired variant: the features switched off
    cut: bool = False  # some jobs were dropped at the end of the budget (``CUT`` answers)


class Cut:
    """The answer of a job dropped at the end of the budget before it started."""


CUT = Cut()


def dispatch_order(targets: list[Target]) -> list[Target]:
    """One target per import group (static, dynamic) first, then one per
    lowered program, then one per compiled artifact, then the targets
    sharing one: by the time a follower starts, its leader has usually put
    the import, the program and the artifact in the artifact cache, so each
    sample is exported and imported once per shape mode, lowered once per
    output type and compiled once per backend and flags."""
    seen: tuple[set[str], set[str], set[str]] = (set(), set(), set())

    def tier(target: Target) -> int:
        groups = (target.import_group, target.program_group, target.compile_group)
        firsts = [group not in known for group, known in zip(groups, seen)]
        for group, known in zip(groups, seen):
            known.add(group)
        return firsts.index(True) if True in firsts else len(firsts)

    tiers = [tier(target) for target in targets]
    return [target for _, target in sorted(zip(tiers, targets), key=lambda pair: pair[0])]


def leaders(ordered: list[Target]) -> list[int | None]:
    """For each target of ``dispatch_order``'s list, the position of the
    earlier target whose cached work it reuses most (same artifact, else same
    program, else same import), or None: the job it should start after."""
    found: list[int | None] = []
    for position, target in enumerate(ordered):
        found.append(None)
        for group in ("compile_group", "program_group", "import_group"):
            mine = getattr(target, group)
            earlier = [i for i in range(position) if getattr(ordered[i], group) == mine]
            if earlier:
                found[-1] = earlier[0]
                break
    return found
