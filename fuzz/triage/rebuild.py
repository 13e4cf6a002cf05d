"""The building blocks every edit of a sample is made of: rebuilding a
sample validly from a changed config or batches (``rebuild``, which says
``None`` for an invalid or unchanged result so that no edit costs the
shrinker a compile for nothing), a batch's bags per table and packing bags
back into a batch (``bags_of``, ``pack``), rewriting every bag at once
(``map_bags``, per-sample weights following), and checking positions.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig, InvalidConfig
from fuzz.model.sample import Batch, InvalidSample, Sample
from fuzz.triage.size import content_hash

__all__ = ["rebuild", "bags_of", "weight_bags_of", "pack", "BagChange", "map_bags",
           "valid_positions"]


def rebuild(sample: Sample, config: DLRMConfig | None = None,
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


def bags_of(batch: Batch, k: int, values: np.ndarray | None = None) -> list[np.ndarray]:
    """Table ``k``'s bags, one index array per example (or, given ``values``
    parallel to the indices, such as per-sample weights, their bags)."""
    ends = np.append(batch.offsets[k][1:], batch.indices[k].shape[0])
    source = batch.indices[k] if values is None else values
    return [source[int(s):int(e)] for s, e in zip(batch.offsets[k], ends)]


def weight_bags_of(batch: Batch, k: int) -> list[np.ndarray] | None:
    """Table ``k``'s per-sample weights as bags (None without weights)."""
    return None if batch.weights is None else bags_of(batch, k, batch.weights[k])


def pack(dense: np.ndarray, table_bags: Sequence[Sequence[np.ndarray]], dtype: np.dtype,
         weight_bags: Sequence[Sequence[np.ndarray] | None] | None = None) -> Batch:
    """A batch from its dense rows and, per table, its bags (and weight
    bags): offsets recomputed from the bag lengths, indices cast to ``dtype``."""
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
    # The layout is set again by ``rebuild`` from the config it rebuilds for.
    return Batch(dense=np.ascontiguousarray(dense, dtype=np.float32), offsets=tuple(offsets),
                 indices=tuple(indices),
                 weights=tuple(weights) if weight_bags is not None and weights else None)


BagChange = Callable[[int, int, list[np.ndarray]], list[np.ndarray]]


def map_bags(sample: Sample, change: BagChange, config: DLRMConfig | None = None,
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
                wbags = weight_bags_of(batch, k)
                assert wbags is not None
                weight_bags.append(wchange(b, k, wbags) if wchange is not None else wbags)
        batches.append(pack(batch.dense, [change(b, k, bags_of(batch, k)) for k in tables],
                            dtype, weight_bags))
    return rebuild(sample, config, batches)


def valid_positions(count: int, positions: Iterable[int]) -> list[int] | None:
    """``positions`` sorted and de-duplicated, or None if one is not in ``range(count)``."""
    chosen = sorted(set(positions))
    if any(not 0 <= p < count for p in chosen):
        return None
    return chosen
