"""Feature ablation for localizing a MISMATCH: which of the DLRM features a
failing sample turns on does the failure need?

Features are read off the sample, not listed here: every ``DLRMConfig`` knob
away from its default (so a knob added to the config is ablated without code
in this module), plus what the inputs do that no knob says (empty bags,
batches of several shapes). Switching a feature off is an edit from
``fuzz.triage.edits``; one at a time, a feature whose removal makes the failure
disappear is kept in the minimal set, any other is switched off for good.

Naming: a knob is named by its field (``qr_flag``, ``sigmoid_top``,
``index_dtype``) unless it is an enumerated choice with more than two values
(as ``fuzz.model.config.KNOBS`` declares them), where each non-default value
is its own code path and the name carries it
(``weighted_pooling=learned``, ``qr_operation=concat``, ``quantize_bits=4``).
Fixed and learned pooling weights do compile differently (a constant buffer
folded into the program vs. a parameter passed in), so they are kept apart;
``family(name)`` gives the field alone for callers that want them merged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from fuzz.triage import edits
from fuzz.model.config import KNOBS
from fuzz.triage.edits import Edit
from fuzz.model.sample import Sample
from fuzz.triage.shrink import check_reducer_arguments

__all__ = ["features", "ablate", "Ablation", "family", "SAMPLE_FEATURES"]


def _name(knob: str, value: Any) -> str:
    values = KNOBS[knob].values
    return f"{knob}={value}" if values is not None and len(values) > 2 else knob


def family(name: str) -> str:
    """A feature's knob without its value: ``weighted_pooling=fixed`` -> ``weighted_pooling``."""
    return name.split("=", 1)[0]


def _has_empty_bags(sample: Sample) -> bool:
    return any((batch.bag_lengths(k) == 0).any() for batch in sample.batches
               for k in range(sample.config.num_tables))


def _has_mixed_shapes(sample: Sample) -> bool:
    first = [a.shape for a in sample.batches[0].flat()]
    return any([a.shape for a in batch.flat()] != first for batch in sample.batches[1:])


SAMPLE_FEATURES: dict[str, tuple[Callable[[Sample], bool], Edit]] = {
    "empty_bags": (_has_empty_bags, edits.fill_empty_bags),
    "mixed_shapes": (_has_mixed_shapes, edits.same_shape_batches),
}
"""Input features no knob names: (present?, switch off)."""


def _knob_off(name: str) -> Edit:
    return lambda sample: edits.knob_to_default(sample, name)


def features(sample: Sample) -> dict[str, Edit]:
    """Each feature ``sample`` turns on, by name, with the edit that turns it
    off: config knobs in field order, then input features."""
    found: dict[str, Edit] = {_name(knob, value): _knob_off(knob)
                              for knob, value in edits.non_default_knobs(sample.config).items()}
    for name, (present, switch_off) in SAMPLE_FEATURES.items():
        if present(sample):
            found[name] = switch_off
    return found


@dataclass(frozen=True)
class Ablation:
    """``minimal``: the features the failure needs (switching any one off made
    it disappear, or it could not be switched off); ``untested``: features the
    budget left unexamined; ``sample``: the input with every other feature off."""

    minimal: tuple[str, ...]
    untested: tuple[str, ...]
    steps: int
    seconds: float
    sample: Sample

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the features the failure needs, and the reduced config and seed."""
        return {"minimal": list(self.minimal), "untested": list(self.untested),
                "steps": self.steps, "seconds": round(self.seconds, 3),
                "config": self.sample.config.to_dict(), "seed": self.sample.seed}


def ablate(sample: Sample, still_failing: Callable[[Sample], bool], budget_s: float) -> Ablation:
    """Switch ``sample``'s features off one at a time (see the module doc).

    Greedy and order-dependent on purpose (one predicate call per feature):
    when two features are needed together (AND) both are kept; when either
    alone suffices (OR) the earlier one is switched off while the later still
    carries the failure, so the minimal set names only the later one: a
    sufficient set, not every cause.
    """
    check_reducer_arguments(sample, still_failing, budget_s)
    return _ablate(sample, still_failing, budget_s)


def _ablate(sample: Sample, still_failing: Callable[[Sample], bool], budget_s: float) -> Ablation:
    start = time.monotonic()
    current, kept, untested, steps = sample, [], [], 0
    for name in features(sample):
        edit = features(current).get(name)
        if edit is None:  # switched off along with an earlier feature
            continue
        if time.monotonic() - start >= budget_s:
            untested.append(name)
            continue
        candidate = edit(current)
        if candidate is None:  # cannot be switched off alone: it stays
            kept.append(name)
            continue
        steps += 1
        if still_failing(candidate):
            current = candidate
        else:
            kept.append(name)
    return Ablation(minimal=tuple(sorted(kept)), untested=tuple(sorted(untested)), steps=steps,
                    seconds=time.monotonic() - start, sample=current)
