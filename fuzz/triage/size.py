"""How big a sample is, and when one is strictly smaller than another: the
measures the shrinker descends (``sample_size``, ordered by ``size_key``:
fewer tables, examples and indices first, then features, sizes and values),
and a sample's content identity (``content_hash``), which tells the shrinker a
candidate it has tried and an edit that changed nothing. Apart from the edits
(``fuzz.triage.edits``) because the order is the shrinker's goal, not a move.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from fuzz.model.config import DLRMConfig, knobs
from fuzz.model.sample import Sample

__all__ = ["non_default_knobs", "sample_size", "size_key", "content_hash"]


def non_default_knobs(config: DLRMConfig) -> dict[str, Any]:
    """The knobs ``config`` sets away from their default, in field order."""
    return {name: getattr(config, name) for name, default in knobs().items()
            if getattr(config, name) != default}


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
