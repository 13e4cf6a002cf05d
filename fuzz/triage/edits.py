"""Structured, validity-preserving edits of a ``Sample``: the moves the
shrinker and the feature ablation are made of, all in one namespace
(``edits.keep_tables``, ``edits.size_key``, ...).

Each edit takes a sample and returns a new one, or ``None`` when the edit does
not apply here, would break a DLRM invariant, or would change nothing. An edit
never patches widths by hand: it states what it changes and the config
rebuilds the derived widths (``ln_bot[-1]``, the embedding width; ``ln_top[0]``,
the interaction width) exactly as ``DLRMConfig`` demands, so a new knob or a
new width rule in the config is picked up here without code. The edits live
by what they change: the architecture (``config_edits``) or the inputs alone
(``input_edits``), over shared building blocks (``rebuild``); ``size_key``
(``size``) is the total order that says when one sample is strictly smaller
than another. A new edit goes into one of those two modules and its name here.
"""

from __future__ import annotations

from typing import Callable

from fuzz.model.config import config_with, knobs
from fuzz.model.sample import Sample
from fuzz.triage.config_edits import (MLP, drop_dense_columns, drop_hidden, drop_table, fewer_rows,
                                      keep_tables, knob_to_default, knobs_to_default, narrow_layer,
                                      narrow_m_spa, narrow_table_width, set_knob)
from fuzz.triage.input_edits import (drop_batch, drop_example, empty_bags_of, fill_empty_bags,
                                     halve_indices, keep_bag_indices, keep_batches, keep_examples,
                                     round_dense, same_shape_batches, shorten_bag, unit_weights,
                                     with_seed, zero_dense, zero_indices)
from fuzz.triage.size import content_hash, non_default_knobs, sample_size, size_key

__all__ = [
    "config_with", "Edit", "MLP",
    "knobs", "non_default_knobs", "sample_size", "size_key", "content_hash",
    "keep_tables", "drop_table", "keep_batches", "drop_batch", "keep_examples", "drop_example",
    "keep_bag_indices", "empty_bags_of", "shorten_bag", "fill_empty_bags", "fewer_rows",
    "narrow_m_spa", "narrow_table_width", "drop_hidden", "narrow_layer", "drop_dense_columns",
    "set_knob", "knob_to_default", "knobs_to_default", "zero_indices", "halve_indices", "zero_dense",
    "round_dense", "unit_weights", "with_seed", "same_shape_batches",
]

Edit = Callable[[Sample], "Sample | None"]
