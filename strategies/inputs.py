"""Hypothesis strategies for DLRM inputs: dense rows and jagged per-table bags.

A batch is built constructively as a list of examples (one dense row plus one
bag per table), so the batch size is the list's length rather than a drawn
number, and it shrinks toward a batch of one. Bags are where lowerings break:
they can be empty, repeat an index, or hit the first and last row of a table.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st

from fuzz.config import DLRMConfig
from fuzz.sample import Batch

__all__ = ["bags", "batches", "batches_like", "dense_values", "batch_from_rows"]

MAX_BAG = 6


def dense_values() -> st.SearchStrategy[float]:
    """Finite float32 dense features in [-4, 4]; shrinks toward 0."""
    return st.floats(-4.0, 4.0, width=32)


def _index(rows: int) -> st.SearchStrategy[int]:
    # The last row is drawn on purpose: off-by-one bounds checks live there.
    return st.one_of(st.integers(0, rows - 1), st.just(rows - 1))


def bags(rows: int, max_bag: int = MAX_BAG) -> st.SearchStrategy[list[int]]:
    """One bag of indices into a table of ``rows`` rows: non-empty, empty, or one
    index repeated. Shrinks toward a single index 0."""
    if rows < 1 or max_bag < 1:
        raise ValueError(f"rows={rows}, max_bag={max_bag}: both must be >= 1")
    return st.one_of(
        st.lists(_index(rows), min_size=1, max_size=max_bag),
        st.just([]),
        st.builds(lambda i, n: [i] * n, _index(rows), st.integers(2, max_bag)),
    )


def batch_from_rows(config: DLRMConfig, dense: Sequence[Sequence[float]],
                    table_bags: Sequence[Sequence[Sequence[int]]]) -> Batch:
    """Pack per-example dense rows and per-table bags into offsets + flat indices."""
    dtype = np.dtype(config.index_dtype)
    offsets, indices = [], []
    for bags_k in table_bags:
        lengths = [len(bag) for bag in bags_k]
        offsets.append(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(dtype))
        flat = [i for bag in bags_k for i in bag]
        indices.append(np.asarray(flat, dtype=dtype).reshape(len(flat)))
    return Batch(dense=np.asarray(dense, dtype=np.float32).reshape(len(dense), config.num_dense),
                 offsets=tuple(offsets), indices=tuple(indices))


@st.composite
def _batches(draw: Any, config: DLRMConfig, max_batch: int) -> Batch:
    example = st.tuples(
        st.lists(dense_values(), min_size=config.num_dense, max_size=config.num_dense),
        st.tuples(*(bags(rows) for rows in config.ln_emb)),
    )
    rows = draw(st.lists(example, min_size=1, max_size=max_batch))
    dense = [row[0] for row in rows]
    table_bags = [[row[1][k] for row in rows] for k in range(config.num_tables)]
    return batch_from_rows(config, dense, table_bags)


def batches(config: DLRMConfig, max_batch: int = 8) -> st.SearchStrategy[Batch]:
    """One input batch for ``config`` (1..max_batch examples, jagged bags per
    table). Shrinks toward one example whose bags each hold index 0."""
    if max_batch < 1:
        raise ValueError(f"max_batch={max_batch}: must be >= 1")
    return _batches(config, max_batch)


@st.composite
def _batches_like(draw: Any, config: DLRMConfig, like: Batch) -> Batch:
    dense = draw(st.lists(st.lists(dense_values(), min_size=config.num_dense,
                                   max_size=config.num_dense),
                          min_size=like.batch_size, max_size=like.batch_size))
    table_bags = []
    for k, rows in enumerate(config.ln_emb):
        count = int(like.indices[k].shape[0])
        flat = draw(st.lists(_index(rows), min_size=count, max_size=count))
        cuts = sorted(draw(st.lists(st.integers(0, count), min_size=like.batch_size - 1,
                                    max_size=like.batch_size - 1)))
        bounds = [0, *cuts, count]
        table_bags.append([flat[bounds[i]:bounds[i + 1]] for i in range(like.batch_size)])
    return batch_from_rows(config, dense, table_bags)


def batches_like(config: DLRMConfig, like: Batch) -> st.SearchStrategy[Batch]:
    """Batches with exactly the shapes of ``like`` (batch size and per-table
    index counts) but new contents and bag boundaries: what one static-shape
    compiled artifact can be checked against. Shrinks toward index 0 and all
    indices in the last bag."""
    return _batches_like(config, like)
