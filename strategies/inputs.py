"""Hypothesis strategies for DLRM inputs: dense rows and jagged per-table bags.

A batch is built constructively as a list of examples (one dense row plus one
bag per table), so the batch size is the list's length rather than a drawn
number, and it shrinks toward a batch of one. Bags are where lowerings break:
they can be empty, repeat an index, or hit the first and last row of a table
(and, for a QR table of 2^24 rows or more, rows at and beyond 2^24).

The config's input layout shapes the draw: fixed-length bags draw one bag
length per table first (what the layout is), and stacked tables get equal
index counts by topping up each table's last bag. Per-sample weights are
drawn per index and shrink toward 1. Medium-class batches (up to 128
examples, bags up to 64) are too many choices for Hypothesis' buffer: their
contents come from numpy, seeded by a drawn integer, their sizes drawn; they
shrink by the shape class falling back to tiny, and a found failure is
minimized by dlrm-fuzz's own shrinker.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st

from fuzz.model.config import DLRMConfig
from fuzz.model.sample import Batch, top_index

__all__ = ["bags", "batches", "batches_like", "dense_values", "weight_values", "batch_from_rows",
           "top_index"]

MAX_BAG = 6
_BIG = 2**24


def dense_values(dtype: str = "float32") -> st.SearchStrategy[float]:
    """Finite float32 dense features, mostly in [-4, 4], sometimes of large
    magnitude (up to 1e6; 1e3 for float16 models, whose range ends at 65504);
    shrinks toward 0."""
    large = 1e3 if dtype == "float16" else 1e6
    return st.one_of(st.floats(-4.0, 4.0, width=32), st.floats(-large, large, width=32))


def weight_values() -> st.SearchStrategy[float]:
    """Per-sample weights in [-1, 3]; shrinks toward 1 (a plain sum)."""
    return st.floats(-2.0, 2.0, width=32).map(lambda w: float(np.float32(1.0 - w)))


def _index(rows: int, top: int | None = None) -> st.SearchStrategy[int]:
    # The last row is drawn on purpose: off-by-one bounds checks live there.
    top = rows - 1 if top is None else top
    if top < _BIG:
        return st.one_of(st.integers(0, top), st.just(top))
    return st.one_of(st.integers(0, top), st.just(top), st.integers(_BIG - 4, top))


def bags(rows: int, max_bag: int = MAX_BAG, top: int | None = None) -> st.SearchStrategy[list[int]]:
    """One bag of indices into a table of ``rows`` rows (up to ``top``): non-empty,
    empty, or one index repeated. Shrinks toward a single index 0."""
    if rows < 1 or max_bag < 1:
        raise ValueError(f"rows={rows}, max_bag={max_bag}: both must be >= 1")
    index = _index(rows, top)
    return st.one_of(
        st.lists(index, min_size=1, max_size=max_bag),
        st.just([]),
        st.builds(lambda i, n: [i] * n, index, st.integers(2, max_bag)),
    )


def batch_from_rows(config: DLRMConfig, dense: Sequence[Sequence[float]],
                    table_bags: Sequence[Sequence[Sequence[int]]],
                    table_weights: Sequence[Sequence[float]] | None = None) -> Batch:
    """Pack per-example dense rows and per-table bags (and, per table, one
    weight per index) into offsets + flat indices, laid out for ``config``."""
    dtype = np.dtype(config.index_dtype)
    offsets, indices = [], []
    for bags_k in table_bags:
        lengths = [len(bag) for bag in bags_k]
        offsets.append(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(dtype))
        flat = [i for bag in bags_k for i in bag]
        indices.append(np.asarray(flat, dtype=dtype).reshape(len(flat)))
    weights = None if table_weights is None else tuple(
        np.asarray(w, np.float32).reshape(len(w)) for w in table_weights)
    return Batch.for_config(
        config, np.asarray(dense, dtype=np.float32).reshape(len(dense), config.num_dense),
        tuple(offsets), tuple(indices), weights)


def _draw_weights(draw: Any, config: DLRMConfig,
                  table_bags: Sequence[Sequence[Sequence[int]]]) -> list[list[float]] | None:
    if not config.per_sample_weights:
        return None
    return [draw(st.lists(weight_values(), min_size=n, max_size=n))
            for n in (sum(len(bag) for bag in bags_k) for bags_k in table_bags)]


def _equalize(draw: Any, config: DLRMConfig, table_bags: list[list[list[int]]]) -> None:
    """Stacked layout: top up each table's last bag to the largest index count."""
    counts = [sum(len(bag) for bag in bags_k) for bags_k in table_bags]
    for k, count in enumerate(counts):
        deficit = max(counts) - count
        if deficit:
            table_bags[k][-1] = table_bags[k][-1] + draw(st.lists(
                _index(config.ln_emb[k], top_index(config, k)), min_size=deficit,
                max_size=deficit))


@st.composite
def _batches(draw: Any, config: DLRMConfig, max_batch: int, max_bag: int) -> Batch:
    tops = [top_index(config, k) for k in range(config.num_tables)]
    if config.input_layout == "fixed":
        lengths = [draw(st.integers(1, max_bag)) for _ in config.ln_emb]
        table_bag = [st.lists(_index(rows, top), min_size=n, max_size=n)
                     for rows, top, n in zip(config.ln_emb, tops, lengths)]
    else:
        table_bag = [bags(rows, max_bag, top) for rows, top in zip(config.ln_emb, tops)]
    example = st.tuples(
        st.lists(dense_values(config.dtype), min_size=config.num_dense, max_size=config.num_dense),
        st.tuples(*table_bag),
    )
    rows = draw(st.lists(example, min_size=1, max_size=max_batch))
    dense = [row[0] for row in rows]
    table_bags = [[list(row[1][k]) for row in rows] for k in range(config.num_tables)]
    if config.input_layout == "stacked":
        _equalize(draw, config, table_bags)
    return batch_from_rows(config, dense, table_bags, _draw_weights(draw, config, table_bags))


@st.composite
def _bulk_batches(draw: Any, config: DLRMConfig, max_batch: int, max_bag: int) -> Batch:
    """Big batches: sizes drawn, contents from numpy seeded by a drawn integer."""
    size = draw(st.integers(1, max_batch))
    longest = [draw(st.integers(1, max_bag)) for _ in config.ln_emb]
    scale = draw(st.sampled_from([1.0, 10.0, 1e3 if config.dtype == "float16" else 1e5]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = (rng.standard_normal((size, config.num_dense)) * scale).astype(np.float32)
    table_bags = []
    for k, rows in enumerate(config.ln_emb):
        top = top_index(config, k)
        fixed = config.input_layout == "fixed"
        lengths = [longest[k]] * size if fixed else rng.integers(0, longest[k] + 1, size).tolist()
        low = _BIG - 4 if top >= _BIG and rng.random() < 0.5 else 0
        bags_k = [rng.integers(low, top + 1, n).tolist() for n in lengths]
        for bag in bags_k:  # the last row, on purpose, now and then
            if bag and rng.random() < 0.2:
                bag[-1] = top
        table_bags.append(bags_k)
    if config.input_layout == "stacked":
        counts = [sum(len(b) for b in bags_k) for bags_k in table_bags]
        for k, bags_k in enumerate(table_bags):
            bags_k[-1] = bags_k[-1] + [top_index(config, k)] * (max(counts) - counts[k])
    weights = None
    if config.per_sample_weights:
        weights = [rng.uniform(-1.0, 3.0, sum(len(b) for b in bags_k)).tolist()
                   for bags_k in table_bags]
    return batch_from_rows(config, dense.tolist(), table_bags, weights)


def batches(config: DLRMConfig, max_batch: int = 8, max_bag: int = MAX_BAG) -> st.SearchStrategy[Batch]:
    """One input batch for ``config`` (1..max_batch examples, jagged bags per
    table of up to ``max_bag`` indices, laid out as the config says). Shrinks
    toward one example whose bags each hold index 0. Beyond 8 examples or bags
    of 6 the contents come from numpy (module doc)."""
    if max_batch < 1:
        raise ValueError(f"max_batch={max_batch}: must be >= 1")
    if max_bag < 1:
        raise ValueError(f"max_bag={max_bag}: must be >= 1")
    if max_batch > 8 or max_bag > MAX_BAG:
        return _bulk_batches(config, max_batch, max_bag)
    return _batches(config, max_batch, max_bag)


@st.composite
def _batches_like(draw: Any, config: DLRMConfig, like: Batch) -> Batch:
    dense = draw(st.lists(st.lists(dense_values(config.dtype), min_size=config.num_dense,
                                   max_size=config.num_dense),
                          min_size=like.batch_size, max_size=like.batch_size))
    table_bags = []
    for k, rows in enumerate(config.ln_emb):
        count = int(like.indices[k].shape[0])
        flat = draw(st.lists(_index(rows, top_index(config, k)), min_size=count, max_size=count))
        if config.input_layout == "fixed":
            length = count // like.batch_size
            bounds = [i * length for i in range(like.batch_size + 1)]
        else:
            cuts = sorted(draw(st.lists(st.integers(0, count), min_size=like.batch_size - 1,
                                        max_size=like.batch_size - 1)))
            bounds = [0, *cuts, count]
        table_bags.append([flat[bounds[i]:bounds[i + 1]] for i in range(like.batch_size)])
    return batch_from_rows(config, dense, table_bags, _draw_weights(draw, config, table_bags))


def batches_like(config: DLRMConfig, like: Batch) -> st.SearchStrategy[Batch]:
    """Batches with exactly the shapes of ``like`` (batch size and per-table
    index counts; bag lengths too for fixed-length bags) but new contents and
    bag boundaries: what one static-shape compiled artifact can be checked
    against. Shrinks toward index 0 and all indices in the last bag."""
    return _batches_like(config, like)
