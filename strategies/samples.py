"""The top-level strategy: whole fuzzing samples (config, weight seed, batches)."""

from __future__ import annotations

from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from fuzz.model.config import DLRMConfig, weights_as_inputs
from fuzz.model.focus import Focus
from fuzz.model.sample import Sample
from strategies.configs import SHAPE_CLASSES, dlrm_configs, shape_classes
from strategies.inputs import MAX_BAG, batches, batches_like

__all__ = ["samples"]


@st.composite
def _samples(draw: Any, configs: st.SearchStrategy[DLRMConfig] | None, max_batch: int,
             max_batches: int, focus: Focus | None = None) -> Sample:
    max_bag = MAX_BAG
    if configs is None:
        shape = focus.shape if focus is not None and focus.shape else draw(shape_classes())
        limits = SHAPE_CLASSES[shape]
        configs = dlrm_configs(limits)
        max_batch, max_bag = limits.max_batch, limits.max_bag
    config = draw(configs)
    if focus is not None:  # into the region, or the draw is rejected
        projected = focus.project(config)
        if projected is None:
            reject()
        config = projected
    seed = draw(st.integers(0, 2**32 - 1))
    one = focus is not None and "batch_of_one" in focus.inputs
    first = draw(batches(config, 1 if one else max_batch, max_bag))
    # Batches shaped like the first feed static-shape targets (compiled for
    # that shape); differently shaped ones exercise dynamic-shape targets.
    more = draw(st.lists(st.one_of(batches_like(config, first),
                                   batches(config, max_batch, max_bag)),
                         max_size=max_batches - 1))
    # With the weights as program inputs, more weight draws cost a run each
    # against the same artifact, not a compile (fuzz/weights.py).
    draws = draw(st.lists(st.integers(0, 2**32 - 1), max_size=2, unique=True)) \
        if weights_as_inputs(config) else []
    sample = Sample(config=config, seed=seed, batches=(first, *more),
                    draws=tuple(d for d in draws if d != seed))
    if focus is not None and not focus.holds(sample):  # input edge cases, shape class
        reject()
    return sample


def samples(configs: st.SearchStrategy[DLRMConfig] | None = None, *, max_batch: int = 8,
            max_batches: int = 3, focus: Focus | None = None) -> st.SearchStrategy[Sample]:
    """Samples: a config, a weight seed and 1..max_batches batches, each either
    shaped like the first (one static compile checks them all) or of a new
    batch size and index counts (checked by dynamic-shape targets against the
    same artifact). Without ``configs``, a shape class is drawn first (tiny
    mostly, medium, large; ``strategies.configs``) and sets the config's sizes
    and the batches' (``max_batch`` then applies to given configs only).
    Shrinks toward the tiny class, the simplest config, seed 0, and a single
    batch of one.

    With ``focus`` (``fuzz.model.focus``) every sample lies in its region: the
    focus' shape class is used, each drawn config is projected onto its pins
    (free knobs that conflict fall back to their defaults), a focus on
    ``input=batch_of_one`` makes the first batch one example, and a sample
    missing a focused input edge case is rejected (they are drawn often)."""
    if max_batches < 1:
        raise ValueError(f"max_batches={max_batches}: must be >= 1")
    if focus is not None and not isinstance(focus, Focus):
        raise TypeError(f"focus={focus!r}: must be a fuzz.model.focus.Focus or None")
    return _samples(configs, max_batch, max_batches, focus)
