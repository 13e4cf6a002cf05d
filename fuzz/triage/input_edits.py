"""Edits of a sample's inputs that keep its architecture: fewer batches,
examples and bag entries, empty or filled bags, and values toward zero
(indices, dense features, per-sample weights, the weight seed). Each returns
a new sample, or ``None`` where it does not apply or would change nothing.
The edits of the architecture are ``fuzz.triage.config_edits``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fuzz.model.sample import Batch, Sample
from fuzz.triage.rebuild import bags_of, map_bags, pack, rebuild, valid_positions, weight_bags_of

__all__ = ["keep_batches", "drop_batch", "same_shape_batches", "keep_examples", "drop_example",
           "keep_bag_indices", "empty_bags_of", "shorten_bag", "fill_empty_bags", "zero_indices",
           "halve_indices", "zero_dense", "round_dense", "unit_weights", "with_seed"]


# -- batches, examples, bags -----------------------------------------------
def keep_batches(sample: Sample, keep: Sequence[int]) -> Sample | None:
    """Only the batches ``keep`` (None when that keeps all or none): fewer runs to read."""
    chosen = valid_positions(len(sample.batches), keep)
    if not chosen or len(chosen) == len(sample.batches):
        return None
    return rebuild(sample, batches=[sample.batches[b] for b in chosen])


def drop_batch(sample: Sample, b: int) -> Sample | None:
    """A shrink step: the sample without batch ``b`` (None when that cannot be done)."""
    return keep_batches(sample, [i for i in range(len(sample.batches)) if i != b])


def same_shape_batches(sample: Sample) -> Sample | None:
    """Only the batches shaped like the first (what a static target checks)."""
    first = [a.shape for a in sample.batches[0].flat()]
    return keep_batches(sample, [b for b, batch in enumerate(sample.batches)
                                 if [a.shape for a in batch.flat()] == first])


def keep_examples(sample: Sample, b: int, keep: Sequence[int]) -> Sample | None:
    """Batch ``b`` cut to the examples ``keep``: their dense rows and, in every
    table, their bags (offsets recomputed)."""
    if not 0 <= b < len(sample.batches):
        return None
    batch = sample.batches[b]
    chosen = valid_positions(batch.batch_size, keep)
    if not chosen or len(chosen) == batch.batch_size:
        return None
    tables = range(sample.config.num_tables)
    table_bags = [[bags[r] for r in chosen] for bags in (bags_of(batch, k) for k in tables)]
    weight_bags: list[Sequence[np.ndarray] | None] | None = None
    if batch.weights is not None:
        weight_bags = [[wbags[r] for r in chosen] if wbags is not None else None
                       for wbags in (weight_bags_of(batch, k) for k in tables)]
    cut = pack(batch.dense[chosen], table_bags, np.dtype(sample.config.index_dtype), weight_bags)
    return rebuild(sample, batches=[cut if i == b else x for i, x in enumerate(sample.batches)])


def drop_example(sample: Sample, b: int, row: int) -> Sample | None:
    """A shrink step: batch ``b`` without example ``row``, its bags too."""
    if not 0 <= b < len(sample.batches):
        return None
    return keep_examples(sample, b, [r for r in range(sample.batches[b].batch_size) if r != row])


def keep_bag_indices(sample: Sample, b: int, k: int, row: int, keep: Sequence[int]) -> Sample | None:
    """The bag of example ``row`` in table ``k`` of batch ``b`` keeps only the
    positions ``keep`` (possibly none: an empty bag)."""
    if not (0 <= b < len(sample.batches) and 0 <= k < sample.config.num_tables
            and 0 <= row < sample.batches[b].batch_size):
        return None
    size = int(sample.batches[b].bag_lengths(k)[row])
    chosen = valid_positions(size, keep)
    if chosen is None or len(chosen) == size:
        return None
    return map_bags(sample, lambda bi, ki, bags: [
        bag[chosen] if (bi, ki, r) == (b, k, row) else bag for r, bag in enumerate(bags)],
        select=True)


def empty_bags_of(sample: Sample, b: int, k: int, rows: Sequence[int]) -> Sample | None:
    """Empty the bags of examples ``rows`` in table ``k`` of batch ``b``."""
    if not (0 <= b < len(sample.batches) and 0 <= k < sample.config.num_tables):
        return None
    chosen = valid_positions(sample.batches[b].batch_size, rows)
    if not chosen:
        return None
    return map_bags(sample, lambda bi, ki, bags: [
        bag[:0] if (bi, ki) == (b, k) and r in chosen else bag for r, bag in enumerate(bags)],
        select=True)


def shorten_bag(sample: Sample, b: int, k: int, row: int, position: int = -1) -> Sample | None:
    """Remove one index (at ``position``) from a bag."""
    if not (0 <= b < len(sample.batches) and 0 <= k < sample.config.num_tables
            and 0 <= row < sample.batches[b].batch_size):
        return None
    size = int(sample.batches[b].bag_lengths(k)[row])
    if size == 0 or not -size <= position < size:
        return None
    drop = position % size
    return keep_bag_indices(sample, b, k, row, [p for p in range(size) if p != drop])


def fill_empty_bags(sample: Sample) -> Sample | None:
    """Every empty bag gets index 0: switches the 'empty bags' feature off
    (a growth, for ablation; the shrinker never uses it)."""
    return map_bags(sample, lambda b, k, bags: [
        bag if bag.shape[0] else np.zeros(1, dtype=bag.dtype) for bag in bags],
        weight_change=lambda b, k, bags: [bag if bag.shape[0] else np.ones(1, np.float32)
                                          for bag in bags])


# -- values ----------------------------------------------------------------
def zero_indices(sample: Sample, b: int | None = None, k: int | None = None) -> Sample | None:
    """Indices set to 0: all of them, or those of batch ``b`` and/or table ``k``."""
    return map_bags(sample, lambda bi, ki, bags: [
        np.zeros_like(bag) if b in (None, bi) and k in (None, ki) else bag for bag in bags])


def halve_indices(sample: Sample) -> Sample | None:
    """Every index halved: smaller, easier-to-read values that stay in range."""
    return map_bags(sample, lambda b, k, bags: [bag // 2 for bag in bags])


def zero_dense(sample: Sample, b: int | None = None, row: int | None = None,
               col: int | None = None) -> Sample | None:
    """Dense features set to 0: all, or one batch, one row, one column."""
    batches = []
    for bi, batch in enumerate(sample.batches):
        dense = batch.dense.copy()
        if b in (None, bi):
            rows = slice(None) if row is None else slice(row, row + 1)
            cols = slice(None) if col is None else slice(col, col + 1)
            # Only nonzero entries change: -0.0 becoming 0.0 is no simpler.
            region = dense[rows, cols]
            region[region != 0.0] = 0.0
        batches.append(Batch(dense, batch.offsets, batch.indices, batch.weights))
    return rebuild(sample, batches=batches)


def round_dense(sample: Sample) -> Sample | None:
    """Dense features rounded to integers (values a reader can type)."""
    return rebuild(sample, batches=[Batch(np.round(batch.dense).astype(np.float32),
                                          batch.offsets, batch.indices, batch.weights)
                                    for batch in sample.batches])


def unit_weights(sample: Sample) -> Sample | None:
    """Every per-sample weight set to 1 (a value a reader need not look at)."""
    if all(batch.weights is None for batch in sample.batches):
        return None
    return rebuild(sample, batches=[Batch(batch.dense, batch.offsets, batch.indices,
                                          None if batch.weights is None else
                                          tuple(np.ones_like(w) for w in batch.weights))
                                    for batch in sample.batches])


def with_seed(sample: Sample, seed: int) -> Sample | None:
    """A shrink step: the same case with weight seed ``seed`` (shrinking tries 0, the plainest)."""
    return rebuild(sample, seed=seed)
