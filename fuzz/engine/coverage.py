"""What a campaign actually exercised: how often each knob value was
generated, and how far the toolchain got with it.

A knob value that is generated but never gets past ``torch.export`` on any
target tests no lowering at all; one that never compiles tests no backend. So
for every sample we count its knob values once under "generated", and under
each stage that at least one target got *through* (exported, lowered,
compiled, ran) and whether at least one target answered right ("passed").
Knob values are read generically from ``DLRMConfig``'s fields (choices,
switches and optional settings; sizes are summarized as a shape class), so a
new knob appears in the table without this module changing. The input edge
cases are ``fuzz.model.focus.INPUT_CLASSES``; with a focus, a ``focus`` row
counts the samples inside its region (all generated ones, by construction).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from fuzz.model.config import DLRMConfig
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

# Sizes and thresholds: summarized by shape_class, or as on/off below.
_SIZE_FIELDS = frozenset({"m_spa", "ln_emb", "ln_bot", "ln_top", "qr_collisions",
                          "qr_threshold", "md_threshold", "schema"})
# Integer fields whose values are a small set of choices.
_CHOICE_INTS = frozenset({"quantize_bits"})
# Fields that only mean something when their switch is on.
_ONLY_WITH = {"qr_operation": "qr_flag"}
def _knob(name: str, value: Any, config: DLRMConfig) -> str | None:
    if name in _SIZE_FIELDS:
        return None
    switch = _ONLY_WITH.get(name)
    if switch is not None and not getattr(config, switch):
        return None
    if name in ("sigmoid_bot", "sigmoid_top"):
        return f"{name}={'off' if value == -1 else 'on'}"
    if name == "loss_threshold":
        return f"clamp={'on' if value else 'off'}"
    if value is None or isinstance(value, (bool, str)) or name in _CHOICE_INTS:
        return f"{name}={value}"
    if isinstance(value, int):  # an optional index-like setting (e.g. a padding row)
        return f"{name}=set"
    return None


def knob_values(sample: Sample) -> list[str]:
    """``name=value`` for every knob of the sample's config, its shape class,
    and the input edge cases it holds (empty bags, a batch of one, ...)."""
    config = sample.config
    found = [knob for f in dataclasses.fields(config)
             if (knob := _knob(f.name, getattr(config, f.name), config)) is not None]
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
