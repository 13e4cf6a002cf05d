"""Repairs: a sample with some of its features switched off, so that a program
group a known bug would stop early still tests the rest of the sample.

A known failure early in a program (int32 offsets in the linalg lowering, a
quantized table, an op one lowering lacks) hides everything behind it: the
lowering stops, nothing compiles, nothing runs, and the wrong answers the
rest of the sample would have shown stay hidden. Skipping such samples keeps
them hidden for good. Instead the scheduler sends that group a *repaired
variant*: the same sample with the doomed features switched off (int64
indices instead of int32, plain tables instead of quantized ones, filled bags
instead of empty ones, ...), everything else as drawn. The variant is a
sample of its own, so a bucket found on it is filed with the variant as its
case (reproducible as stored) and the features repaired are recorded beside it.

Features are the strings ``Sample.features()`` names; switching one off is
an edit from ``fuzz.triage.edits`` (a knob back to its default, or the bags filled).
A feature that is the knob's default (``interaction=dot``) cannot be
switched off: ``repair`` leaves it and says so by not listing it.
"""

from __future__ import annotations

from typing import Iterable

from fuzz.model.config import KNOBS
from fuzz.triage import edits
from fuzz.model.sample import Sample

__all__ = ["switch_off", "repair", "repairable"]


def _knob_of(feature: str) -> str | None:
    """The knob that switches ``feature`` off, as declared (``KNOBS``): the one
    showing it, or that one's switch (``qr=add`` goes with ``qr_flag``); a
    field's own name stands for itself. ``None`` for what no knob names."""
    name = feature.split("=", 1)[0]
    for declared in KNOBS.values():
        if declared.feature == name:
            return declared.switch or declared.name
    return name if name in KNOBS else None


def switch_off(sample: Sample, feature: str) -> Sample | None:
    """``sample`` without ``feature`` (a ``Sample.features()`` string), or
    ``None`` when it cannot be switched off (a default, or an invalid config)."""
    if feature == "empty_bags":
        return edits.fill_empty_bags(sample)
    knob = _knob_of(feature)
    if knob is None:
        return None
    fixed = edits.knob_to_default(sample, knob)
    if fixed is None or feature in fixed.features():
        return None
    return fixed


def repairable(feature: str) -> bool:
    """Whether ``feature`` names something a repair could switch off at all
    (not what a knob shows at its default, such as ``interaction=dot``)."""
    if feature == "empty_bags":
        return True
    at_default = any(declared.always and declared.feature is not None
                     and declared.show(declared.default) == feature
                     for declared in KNOBS.values())
    return _knob_of(feature) is not None and not at_default


def repair(sample: Sample, features: Iterable[str]) -> tuple[Sample, tuple[str, ...]] | None:
    """``sample`` with every one of ``features`` it has switched off that can
    be, and the features actually switched off (in order); ``None`` when none
    could be. Each switch is applied to the previous result, so a repair
    that would make the config invalid is passed over, not fatal."""
    current, done = sample, []
    for feature in features:
        if feature not in current.features():
            continue
        fixed = switch_off(current, feature)
        if fixed is not None:
            current = fixed
            done.append(feature)
    return (current, tuple(done)) if done else None
