"""Structured, validity-preserving edits of a ``Sample``: the moves the
shrinker and the feature ablation are made of.

Each edit takes a sample and returns a new one, or ``None`` when the edit does
not apply here, would break a DLRM invariant, or would change nothing. An edit
never patches widths by hand: it states what it changes and ``_with`` rebuilds
the derived widths (``ln_bot[-1]``, the embedding width; ``ln_top[0]``, the
interaction width) exactly as ``DLRMConfig`` demands, so a new knob or a new
width rule in the config is picked up here without code. ``size_key`` is the
total order that says when one sample is strictly smaller than another.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig, InvalidConfig, config_with, knobs
from fuzz.model.sample import Batch, InvalidSample, Sample

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
MLP = Literal["bot", "top"]


# -- knobs (``knobs`` itself is ``fuzz.model.config.knobs``) -------------------
def non_default_knobs(config: DLRMConfig) -> dict[str, Any]:
    """The knobs ``config`` sets away from their default, in field order."""
    return {name: getattr(config, name) for name, default in knobs().items()
            if getattr(config, name) != default}


# -- sizes -----------------------------------------------------------------
def _examples(sample: Sample) -> int:
    return sum(batch.batch_size for batch in sample.batches)


def sample_size(sample: Sample) -> dict[str, int]:
    """How big a sample is, per axis the shrinker can cut (a report, and the
    parts ``size_key`` orders). ``width`` sums the sparse feature sizes (one per
    table with mixed dimensions); ``mlp`` sums the hidden widths plus the top
    MLP's output width; ``index_sum``/``dense_nonzero``/``dense_nonint`` and
    ``seed`` measure how far the values are from all-zero (per-sample weights:
    from all-one)."""
    config = sample.config
    dense = [batch.dense for batch in sample.batches]
    return {
        "tables": config.num_tables,
        "examples": _examples(sample),
        "indices": sum(int(i.shape[0]) for batch in sample.batches for i in batch.indices),
        "batches": len(sample.batches),
        "features": len(non_default_knobs(config)),
        "rows": sum(config.ln_emb),
        "width": sum(config.m_spa) if isinstance(config.m_spa, tuple) else config.m_spa,
        "dense": config.num_dense,
        "mlp": sum(config.ln_bot[1:-1]) + sum(config.ln_top[1:]),
        "index_sum": sum(int(i.astype(np.int64).sum()) for batch in sample.batches
                         for i in batch.indices),
        "dense_nonzero": sum(int(np.count_nonzero(d)) for d in dense),
        "dense_nonint": sum(int(np.count_nonzero(d != np.round(d))) for d in dense),
        "weights_nonunit": sum(int(np.count_nonzero(w != 1.0)) for batch in sample.batches
                               for w in (batch.weights or ())),
        "seed": int(sample.seed != 0),
    }


_KEY_ORDER = ("tables", "examples", "indices", "batches", "features", "rows", "width", "dense",
              "mlp", "index_sum", "dense_nonzero", "dense_nonint", "weights_nonunit", "seed")


def size_key(sample: Sample) -> tuple[int, ...]:
    """A total order on samples: fewer tables, then fewer examples, then fewer
    indices win before anything else (they are what a bug report reader counts);
    features, sizes and finally values (toward zero, seed 0) break ties."""
    size = sample_size(sample)
    return tuple(size[name] for name in _KEY_ORDER)


def content_hash(sample: Sample) -> str:
    """Identity of a sample's content (config, seed, every array). The arrays
    are hashed directly rather than as ``.npz`` bytes, since a zip archive
    records its write time and two saves of one sample would differ."""
    digest = hashlib.sha256(sample.config.to_json().encode())
    digest.update(str(sample.seed).encode())
    for name, array in sorted(sample.arrays().items()):
        digest.update(f"|{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


# -- building blocks -------------------------------------------------------
def _rebuild(sample: Sample, config: DLRMConfig | None = None,
             batches: Sequence[Batch] | None = None, seed: int | None = None) -> Sample | None:
    """A new sample with its index arrays cast to the config's index dtype;
    ``None`` when it would be invalid or identical to ``sample`` (an edit that
    changes nothing must not cost the shrinker a compile)."""
    config = sample.config if config is None else config
    dtype = np.dtype(config.index_dtype)
    # Laid out as the (new) config takes its inputs: per-sample weights kept,
    # dropped or (switched on) made up, the layout and B+1 offsets as it says.
    cast = tuple(Batch.for_config(config, b.dense, tuple(o.astype(dtype) for o in b.offsets),
                                  tuple(i.astype(dtype) for i in b.indices), b.weights)
                 for b in (sample.batches if batches is None else batches))
    try:
        new = Sample(config=config, seed=sample.seed if seed is None else seed, batches=cast)
    except (InvalidSample, InvalidConfig):
        return None
    return None if content_hash(new) == content_hash(sample) else new


def _bags(batch: Batch, k: int, values: np.ndarray | None = None) -> list[np.ndarray]:
    """Table ``k``'s bags, one index array per example (or, given ``values``
    parallel to the indices, such as per-sample weights, their bags)."""
    ends = np.append(batch.offsets[k][1:], batch.indices[k].shape[0])
    source = batch.indices[k] if values is None else values
    return [source[int(s):int(e)] for s, e in zip(batch.offsets[k], ends)]


def _weight_bags(batch: Batch, k: int) -> list[np.ndarray] | None:
    return None if batch.weights is None else _bags(batch, k, batch.weights[k])


def _pack(dense: np.ndarray, table_bags: Sequence[Sequence[np.ndarray]], dtype: np.dtype,
          weight_bags: Sequence[Sequence[np.ndarray] | None] | None = None) -> Batch:
    offsets, indices, weights = [], [], []
    for k, bags in enumerate(table_bags):
        lengths = [int(bag.shape[0]) for bag in bags]
        offsets.append(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(dtype))
        flat = np.concatenate(list(bags)) if bags else np.zeros(0)
        indices.append(flat.astype(dtype).reshape(-1))
        wbags = weight_bags[k] if weight_bags is not None else None
        if wbags is not None:
            weights.append((np.concatenate(list(wbags)) if wbags else np.zeros(0))
                           .astype(np.float32).reshape(-1))
    # The layout is set again by ``_rebuild`` from the config it rebuilds for.
    return Batch(dense=np.ascontiguousarray(dense, dtype=np.float32), offsets=tuple(offsets),
                 indices=tuple(indices),
                 weights=tuple(weights) if weight_bags is not None and weights else None)


BagChange = Callable[[int, int, list[np.ndarray]], list[np.ndarray]]


def _map_bags(sample: Sample, change: BagChange, config: DLRMConfig | None = None,
              select: bool = False, weight_change: BagChange | None = None) -> Sample | None:
    """Rewrite every (batch b, table k) bag list through ``change(b, k, bags)``.
    Per-sample weights follow: a ``select`` change (it keeps or drops positions,
    never computes values) is applied to the weight bags too; ``weight_change``
    says what else to do with them; otherwise they stay as they are."""
    config = config or sample.config
    dtype = np.dtype(config.index_dtype)
    wchange = change if select else weight_change
    batches = []
    for b, batch in enumerate(sample.batches):
        tables = range(sample.config.num_tables)
        weight_bags: list[list[np.ndarray] | None] | None = None
        if batch.weights is not None:
            weight_bags = []
            for k in tables:
                wbags = _weight_bags(batch, k)
                assert wbags is not None
                weight_bags.append(wchange(b, k, wbags) if wchange is not None else wbags)
        batches.append(_pack(batch.dense, [change(b, k, _bags(batch, k)) for k in tables],
                             dtype, weight_bags))
    return _rebuild(sample, config, batches)


def _valid_positions(count: int, positions: Iterable[int]) -> list[int] | None:
    chosen = sorted(set(positions))
    if any(not 0 <= p < count for p in chosen):
        return None
    return chosen


# -- tables ----------------------------------------------------------------
def keep_tables(sample: Sample, keep: Sequence[int]) -> Sample | None:
    """Only the tables ``keep`` (in order): their rows, widths and bags."""
    config = sample.config
    chosen = _valid_positions(config.num_tables, keep)
    if not chosen or len(chosen) == config.num_tables:
        return None
    m_spa = (tuple(config.m_spa[k] for k in chosen) if isinstance(config.m_spa, tuple)
             else config.m_spa)
    new = config_with(config, ln_emb=tuple(config.ln_emb[k] for k in chosen), m_spa=m_spa)
    if new is None:
        return None
    batches = [Batch(b.dense, tuple(b.offsets[k] for k in chosen),
                     tuple(b.indices[k] for k in chosen),
                     None if b.weights is None else tuple(b.weights[k] for k in chosen))
               for b in sample.batches]
    return _rebuild(sample, new, batches)


def drop_table(sample: Sample, k: int) -> Sample | None:
    """A shrink step: the sample without table ``k`` (None when that cannot be done)."""
    return keep_tables(sample, [t for t in range(sample.config.num_tables) if t != k])


def fewer_rows(sample: Sample, k: int, rows: int) -> Sample | None:
    """Table ``k`` with ``rows`` rows (fewer); indices past the end are clamped
    to the new last row, so 'hits the last row' survives the cut."""
    config = sample.config
    if not 0 <= k < config.num_tables or not 1 <= rows < config.ln_emb[k]:
        return None
    new = config_with(config, ln_emb=tuple(rows if t == k else n for t, n in enumerate(config.ln_emb)))
    if new is None:
        return None
    return _map_bags(sample, lambda b, t, bags: [np.minimum(bag, rows - 1) if t == k else bag
                                                 for bag in bags], new)


def narrow_m_spa(sample: Sample, width: int) -> Sample | None:
    """A sparse feature size of at most ``width`` (every table, with mixed
    dimensions); the bottom and top MLP ends follow."""
    config = sample.config
    if width < 1:
        return None
    m_spa = (tuple(min(w, width) for w in config.m_spa) if isinstance(config.m_spa, tuple)
             else min(config.m_spa, width))
    new = config_with(config, m_spa=m_spa)
    return None if new is None else _rebuild(sample, new)


def narrow_table_width(sample: Sample, k: int, width: int) -> Sample | None:
    """With mixed dimensions, table ``k`` alone gets width ``width``."""
    config = sample.config
    if not isinstance(config.m_spa, tuple) or not 0 <= k < len(config.m_spa) or width < 1:
        return None
    new = config_with(config, m_spa=tuple(width if t == k else w for t, w in enumerate(config.m_spa)))
    return None if new is None else _rebuild(sample, new)


# -- MLPs ------------------------------------------------------------------
def _layers(config: DLRMConfig, mlp: MLP) -> tuple[tuple[int, ...], str, int]:
    name = "ln_bot" if mlp == "bot" else "ln_top"
    sigmoid = config.sigmoid_bot if mlp == "bot" else config.sigmoid_top
    return getattr(config, name), name, sigmoid


def drop_hidden(sample: Sample, mlp: MLP, i: int) -> Sample | None:
    """Remove hidden width ``ln_<mlp>[i]`` (1 <= i < len-1): layers i-1 and i
    merge into one, so a sigmoid on layer i or later moves down by one."""
    config = sample.config
    widths, name, sigmoid = _layers(config, mlp)
    if not 1 <= i < len(widths) - 1:
        return None
    new_sigmoid = sigmoid - 1 if sigmoid >= i else sigmoid
    new = config_with(config, **{name: widths[:i] + widths[i + 1:], f"sigmoid_{mlp}": new_sigmoid})
    return None if new is None else _rebuild(sample, new)


def narrow_layer(sample: Sample, mlp: MLP, i: int, width: int) -> Sample | None:
    """Set hidden width ``ln_<mlp>[i]`` (or the top MLP's output width) to a
    smaller ``width``. The widths DLRM derives are not edited here."""
    config = sample.config
    widths, name, _ = _layers(config, mlp)
    last = len(widths) if mlp == "top" else len(widths) - 1
    if not 1 <= i < last or not 1 <= width < widths[i]:
        return None
    new = config_with(config, **{name: tuple(width if j == i else w for j, w in enumerate(widths))})
    return None if new is None else _rebuild(sample, new)


def drop_dense_columns(sample: Sample, columns: Sequence[int]) -> Sample | None:
    """Fewer dense features: the columns go from every batch and ``ln_bot[0]``."""
    config = sample.config
    chosen = _valid_positions(config.num_dense, columns)
    if not chosen or len(chosen) == config.num_dense:
        return None
    keep = [c for c in range(config.num_dense) if c not in chosen]
    new = config_with(config, ln_bot=(len(keep), *config.ln_bot[1:]))
    if new is None:
        return None
    return _rebuild(sample, new, [Batch(np.ascontiguousarray(b.dense[:, keep]), b.offsets, b.indices,
                                        b.weights) for b in sample.batches])


# -- knobs -----------------------------------------------------------------
def set_knob(sample: Sample, name: str, value: Any) -> Sample | None:
    """One config knob set to ``value`` (index arrays follow ``index_dtype``)."""
    if name not in knobs():
        raise ValueError(f"name={name!r}: not a DLRMConfig knob; knobs are {sorted(knobs())}")
    new = config_with(sample.config, **{name: value})
    if new is None or getattr(new, name) != value:  # overruled: e.g. QR concat's threshold
        return None
    return _rebuild(sample, new)


def knob_to_default(sample: Sample, name: str) -> Sample | None:
    """A shrink step: one config knob back to its default, so the case reads simpler."""
    return set_knob(sample, name, knobs()[name])


def knobs_to_default(sample: Sample, names: Sequence[str]) -> Sample | None:
    """Several knobs back to their defaults at once (delta debugging over the
    knob set: half the knobs in one step instead of one step each)."""
    defaults = knobs()
    unknown = [name for name in names if name not in defaults]
    if unknown:
        raise ValueError(f"name={unknown[0]!r}: not a DLRMConfig knob; knobs are {sorted(defaults)}")
    if not names:
        return None
    new = config_with(sample.config, **{name: defaults[name] for name in names})
    if new is None or any(getattr(new, name) != defaults[name] for name in names):
        return None
    return _rebuild(sample, new)


# -- batches, examples, bags -----------------------------------------------
def keep_batches(sample: Sample, keep: Sequence[int]) -> Sample | None:
    """Only the batches ``keep`` (None when that keeps all or none): fewer runs to read."""
    chosen = _valid_positions(len(sample.batches), keep)
    if not chosen or len(chosen) == len(sample.batches):
        return None
    return _rebuild(sample, batches=[sample.batches[b] for b in chosen])


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
    chosen = _valid_positions(batch.batch_size, keep)
    if not chosen or len(chosen) == batch.batch_size:
        return None
    tables = range(sample.config.num_tables)
    table_bags = [[bags[r] for r in chosen] for bags in (_bags(batch, k) for k in tables)]
    weight_bags: list[Sequence[np.ndarray] | None] | None = None
    if batch.weights is not None:
        weight_bags = [[wbags[r] for r in chosen] if wbags is not None else None
                       for wbags in (_weight_bags(batch, k) for k in tables)]
    cut = _pack(batch.dense[chosen], table_bags, np.dtype(sample.config.index_dtype), weight_bags)
    return _rebuild(sample, batches=[cut if i == b else x for i, x in enumerate(sample.batches)])


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
    chosen = _valid_positions(size, keep)
    if chosen is None or len(chosen) == size:
        return None
    return _map_bags(sample, lambda bi, ki, bags: [
        bag[chosen] if (bi, ki, r) == (b, k, row) else bag for r, bag in enumerate(bags)],
        select=True)


def empty_bags_of(sample: Sample, b: int, k: int, rows: Sequence[int]) -> Sample | None:
    """Empty the bags of examples ``rows`` in table ``k`` of batch ``b``."""
    if not (0 <= b < len(sample.batches) and 0 <= k < sample.config.num_tables):
        return None
    chosen = _valid_positions(sample.batches[b].batch_size, rows)
    if not chosen:
        return None
    return _map_bags(sample, lambda bi, ki, bags: [
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
    return _map_bags(sample, lambda b, k, bags: [
        bag if bag.shape[0] else np.zeros(1, dtype=bag.dtype) for bag in bags],
        weight_change=lambda b, k, bags: [bag if bag.shape[0] else np.ones(1, np.float32)
                                          for bag in bags])


# -- values ----------------------------------------------------------------
def zero_indices(sample: Sample, b: int | None = None, k: int | None = None) -> Sample | None:
    """Indices set to 0: all of them, or those of batch ``b`` and/or table ``k``."""
    return _map_bags(sample, lambda bi, ki, bags: [
        np.zeros_like(bag) if b in (None, bi) and k in (None, ki) else bag for bag in bags])


def halve_indices(sample: Sample) -> Sample | None:
    """Every index halved: smaller, easier-to-read values that stay in range."""
    return _map_bags(sample, lambda b, k, bags: [bag // 2 for bag in bags])


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
    return _rebuild(sample, batches=batches)


def round_dense(sample: Sample) -> Sample | None:
    """Dense features rounded to integers (values a reader can type)."""
    return _rebuild(sample, batches=[Batch(np.round(batch.dense).astype(np.float32),
                                           batch.offsets, batch.indices, batch.weights)
                                     for batch in sample.batches])


def unit_weights(sample: Sample) -> Sample | None:
    """Every per-sample weight set to 1 (a value a reader need not look at)."""
    if all(batch.weights is None for batch in sample.batches):
        return None
    return _rebuild(sample, batches=[Batch(batch.dense, batch.offsets, batch.indices,
                                           None if batch.weights is None else
                                           tuple(np.ones_like(w) for w in batch.weights))
                                     for batch in sample.batches])


def with_seed(sample: Sample, seed: int) -> Sample | None:
    """A shrink step: the same case with weight seed ``seed`` (shrinking tries 0, the plainest)."""
    return _rebuild(sample, seed=seed)
