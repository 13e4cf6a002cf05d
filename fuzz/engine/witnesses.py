"""Which extra target tells blame apart. A wrong answer is blamed on its
lowering when another backend of that lowering computes the same wrong
numbers, else on its backend, so its bucket depends on whether such a
witness ran: a wrong answer with no other backend of its lowering among the
targets that ran gets one from the table, and a stored wrong answer blamed on
a shared lowering is replayed beside one other target it was seen on. This
module only chooses; the session runs the witnesses and judges their answers."""

from __future__ import annotations

from typing import Any, Callable

from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import Target
from oracles import Verdict

__all__ = ["Witnesses", "replay_witnesses"]


class Witnesses:
    """The witness of each target, chosen once from the table (targets available here only)."""

    def __init__(self, table: dict[str, Target]) -> None:
        self.table = table
        self._chosen: dict[str, Target | None] = {}  # target -> its blame witness

    def for_wrong_answers(self, ran: list[Target], outcomes: dict[str, Any]) -> list[Target]:
        """The witnesses one sample's wrong answers need: one for each wrong
        answer with no other backend of its lowering among ``ran`` (nor among
        the witnesses chosen so far)."""
        chosen: dict[str, Target] = {}
        for target in ran:
            outcome = outcomes.get(target.name)
            if outcome is None or outcome.verdict is not Verdict.MISMATCH:
                continue
            siblings = [t for t in [*ran, *chosen.values()]
                        if t.lowering_owner == target.lowering_owner
                        and t.owner("run") != target.owner("run")]
            if siblings:
                continue
            witness = self.for_target(target)
            if witness is not None:
                chosen[witness.name] = witness
        return list(chosen.values())

    def for_target(self, target: Target) -> Target | None:
        """Another backend of ``target``'s lowering, available here: one that
        compiles the same program (shape mode) first, the lowering project's
        own executor (refbackend for torch-mlir's) before others, then in the
        table's order."""
        if target.name not in self._chosen:
            project = target.lowering_owner.split(":", 1)[0] + ":"
            others = [t for t in self.table.values()
                      if t.lowering_owner == target.lowering_owner
                      and t.owner("run") != target.owner("run") and t.availability()[0]]
            others.sort(key=lambda t: (t.program_group != target.program_group,
                                       not t.owner("run").startswith(project)))
            self._chosen[target.name] = others[0] if others else None
        return self._chosen[target.name]


def replay_witnesses(entry: CorpusEntry, target: Target,
                     named: Callable[[str], Target | None]) -> list[Target]:
    """A stored mismatch blamed on a shared lowering needs a second backend to
    be blamed the same way again: one other target it was seen on (``named``
    finds a target by name), available here."""
    if entry.verdict is not Verdict.MISMATCH or entry.owner != target.lowering_owner:
        return []
    for name in entry.seen_on:
        other = named(name)
        if other is not None and other.name != target.name and \
                other.owner("run") != target.owner("run") and other.availability()[0]:
            return [other]
    return []
