"""What a campaign actually exercised: how often each knob value was
generated, and how far the toolchain got with it.

A knob value that is generated but never gets past ``torch.export`` on any
target tests no lowering at all; one that never compiles tests no backend. So
for every sample we count its knob values once under "generated", and under
each stage that at least one target got *through* (exported, lowered,
compiled, ran) and whether at least one target answered right ("passed").
Knob values are counted as each knob's declaration says
(``fuzz.model.config.KNOBS``: choices and switches by value, optional
settings as set or not, sizes not at all but as the shape class), so a new
knob appears in the table without this module changing. The input edge
cases are ``fuzz.model.focus.INPUT_CLASSES``; with a focus, a ``focus`` row
counts the samples inside its region (all generated ones, by construction).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from fuzz.model.config import KNOBS, DLRMConfig, Knob
from fuzz.model.focus import INPUT_CLASSES, Focus, shape_class
from fuzz.model.sample import Sample
from oracles.results import Stage
from oracles.verdict import Outcome, Verdict

__all__ = ["COLUMNS", "Coverage", "FOCUS_ROW", "knob_values", "shape_class"]

# The order stages are gone through; an outcome that failed at one got through
# the ones before it.
_STAGES = (Stage.EXPORT, Stage.IMPORT, Stage.COMPILE, Stage.RUN)
# The row counting the samples inside the campaign's focus.
FOCUS_ROW = "focus (every pin, input and shape)"
COLUMNS = ("generated", "exported", "lowered", "compiled", "ran", "passed")


def _knob(declared: Knob, config: DLRMConfig) -> str | None:
    """The row one knob of ``config`` counts in, as its declaration says."""
    if declared.coverage is None:
        return None
    if declared.switch is not None and not getattr(config, declared.switch):
        return None
    label, value = declared.coverage_label or declared.name, getattr(config, declared.name)
    if declared.coverage == "on/off":
        return f"{label}={'off' if value == declared.default else 'on'}"
    if declared.coverage == "set":
        return f"{label}={value if value == declared.default else 'set'}"
    return f"{label}={value}"


def knob_values(sample: Sample) -> list[str]:
    """``name=value`` for every knob of the sample's config, its shape class,
    and the input edge cases it holds (empty bags, a batch of one, ...)."""
    config = sample.config
    found = [row for declared in KNOBS.values() if (row := _knob(declared, config)) is not None]
    found.append(f"shape={shape_class(sample)}")
    found.extend(f"input={name}" for name, (_, holds) in INPUT_CLASSES.items() if holds(sample))
    return found


def _got_through(outcome: Outcome) -> set[str]:
    """The columns one target's outcome earns."""
    if outcome.verdict in (Verdict.PASS, Verdict.MISMATCH):
        done = {"exported", "lowered", "compiled", "ran"}
        return done | {"passed"} if outcome.verdict is Verdict.PASS else done
    stage = Stage.parse(str(outcome.stage))
    before = _STAGES[:_STAGES.index(stage)] if stage in _STAGES else ()
    return {COLUMNS[1 + _STAGES.index(s)] for s in before}


@dataclass
class Coverage:
    """Counts per knob value and column (see the module docstring)."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    focus: Focus | None = None

    def add(self, sample: Sample, outcomes: Mapping[str, Outcome], generated: bool = True) -> None:
        """Count how far ``sample`` got; ``generated=False`` for a sample whose
        generation was counted already (a repaired variant, a part of a plan)."""
        reached: set[str] = {"generated"} if generated else set()
        for outcome in outcomes.values():
            reached |= _got_through(outcome)
        rows = knob_values(sample)
        if self.focus is not None and self.focus.holds(sample):
            rows.append(FOCUS_ROW)
        for knob in rows:
            self.counts.setdefault(knob, Counter()).update(reached)

    def rows(self) -> list[tuple[str, list[int]]]:
        """(knob value, one count per column), sorted by knob name."""
        return [(knob, [self.counts[knob][c] for c in COLUMNS]) for knob in sorted(self.counts)]

    def to_dict(self) -> dict[str, dict[str, int]]:
        """The counts as JSON (knob value -> column -> count) for the campaign report."""
        return {knob: dict(zip(COLUMNS, counts)) for knob, counts in self.rows()}
