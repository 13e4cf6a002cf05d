"""The top-level strategy: whole fuzzing samples (config, weight seed, batches)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from fuzz.config import DLRMConfig
from fuzz.sample import Sample
from strategies.configs import ConfigLimits, dlrm_configs
from strategies.inputs import batches, batches_like

__all__ = ["samples"]


@st.composite
def _samples(draw: Any, configs: st.SearchStrategy[DLRMConfig], max_batch: int,
             max_batches: int) -> Sample:
    config = draw(configs)
    seed = draw(st.integers(0, 2**32 - 1))
    first = draw(batches(config, max_batch))
    # Batches shaped like the first feed static-shape targets (compiled for
    # that shape); differently shaped ones exercise dynamic-shape targets.
    more = draw(st.lists(st.one_of(batches_like(config, first), batches(config, max_batch)),
                         max_size=max_batches - 1))
    return Sample(config=config, seed=seed, batches=(first, *more))


def samples(configs: st.SearchStrategy[DLRMConfig] | None = None, *, max_batch: int = 8,
            max_batches: int = 3) -> st.SearchStrategy[Sample]:
    """Samples: a config, a weight seed and 1..max_batches batches, each either
    shaped like the first (one static compile checks them all) or of a new
    batch size and index counts (checked by dynamic-shape targets against the
    same artifact). Shrinks toward the simplest config, seed 0, and a single
    batch of one."""
    if max_batches < 1:
        raise ValueError(f"max_batches={max_batches}: must be >= 1")
    return _samples(configs if configs is not None else dlrm_configs(ConfigLimits()),
                    max_batch, max_batches)
