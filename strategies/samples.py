"""The top-level strategy: whole fuzzing samples (config, weight seed, batches)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from fuzz.model.config import DLRMConfig, weights_as_inputs
from fuzz.model.sample import Sample
from strategies.configs import SHAPE_CLASSES, dlrm_configs, shape_classes
from strategies.inputs import MAX_BAG, batches, batches_like

__all__ = ["samples"]


@st.composite
def _samples(draw: Any, configs: st.SearchStrategy[DLRMConfig] | None, max_batch: int,
             max_batches: int) -> Sample:
    max_bag = MAX_BAG
    if configs is None:
        limits = SHAPE_CLASSES[draw(shape_classes())]
        configs = dlrm_configs(limits)
        max_batch, max_bag = limits.max_batch, limits.max_bag
    config = draw(configs)
    seed = draw(st.integers(0, 2**32 - 1))
    first = draw(batches(config, max_batch, max_bag))
    # Batches shaped like the first feed static-shape targets (compiled for
    # that shape); differently shaped ones exercise dynamic-shape targets.
    more = draw(st.lists(st.one_of(batches_like(config, first),
                                   batches(config, max_batch, max_bag)),
                         max_size=max_batches - 1))
    # With the weights as program inputs, more weight draws cost a run each
    # against the same artifact, not a compile (fuzz/weights.py).
    draws = draw(st.lists(st.integers(0, 2**32 - 1), max_size=2, unique=True)) \
        if weights_as_inputs(config) else []
    return Sample(config=config, seed=seed, batches=(first, *more),
                  draws=tuple(d for d in draws if d != seed))


def samples(configs: st.SearchStrategy[DLRMConfig] | None = None, *, max_batch: int = 8,
            max_batches: int = 3) -> st.SearchStrategy[Sample]:
    """Samples: a config, a weight seed and 1..max_batches batches, each either
    shaped like the first (one static compile checks them all) or of a new
    batch size and index counts (checked by dynamic-shape targets against the
    same artifact). Without ``configs``, a shape class is drawn first (tiny
    mostly, medium, large; ``strategies.configs``) and sets the config's sizes
    and the batches' (``max_batch`` then applies to given configs only).
    Shrinks toward the tiny class, the simplest config, seed 0, and a single
    batch of one."""
    if max_batches < 1:
        raise ValueError(f"max_batches={max_batches}: must be >= 1")
    return _samples(configs, max_batch, max_batches)
