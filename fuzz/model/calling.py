"""How the eager model is called and exported: a sample's flat input arrays
(``Batch.flat()``) as ``forward``'s arguments in the config's input layout
(``to_torch``), its outputs back as arrays (``to_numpy``), and the example
inputs and dynamic-shape spec a shape-polymorphic ``torch.export`` traces with
(``tracing_example``, ``dynamic_shapes``). Apart from ``fuzz.model.dlrm``,
which is the model itself: a new input layout changes this module and the
model's ``apply_emb``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from fuzz.model.config import DLRMConfig
from fuzz.model.sample import Batch

__all__ = ["to_torch", "to_numpy", "tracing_example", "dynamic_shapes"]


def to_numpy(tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Tensors as arrays; numpy has no bfloat16, so those are widened to
    float32 (exact)."""
    return [(t.detach().float() if t.dtype == torch.bfloat16 else t.detach()).numpy()
            for t in tensors]


def to_torch(arrays: Sequence[np.ndarray], layout: "int | DLRMConfig",
             dtype: torch.dtype = torch.float32) -> tuple[Any, ...]:
    """Turn a flat input list (``Batch.flat()``) into forward's arguments:
    ``(dense, offsets, indices)`` (``(dense, indices)`` for fixed-length bags,
    see ``FixedLengthDLRM``), plus per-sample weights when the config has
    them. ``layout`` is the config (or, for per-table lists, just the number of
    tables). Float inputs (dense, weights) become ``dtype``."""
    def tensor(a: np.ndarray, floating: bool = False) -> torch.Tensor:
        out = torch.from_numpy(np.ascontiguousarray(a))
        return out.to(dtype) if floating else out

    dense = tensor(arrays[0], True)
    if isinstance(layout, int):
        kind, tables, weighted = "lists", layout, False
    else:
        kind, tables, weighted = layout.input_layout, layout.num_tables, layout.per_sample_weights
    rest = list(arrays[1:])
    if kind == "stacked":
        offsets: Any = tensor(rest[0])
        indices: Any = tensor(rest[1])
        weights: Any = tensor(rest[2], True) if weighted else None
    elif kind == "fixed":
        offsets = None
        indices = [tensor(a) for a in rest[:tables]]
        weights = [tensor(a, True) for a in rest[tables:2 * tables]] if weighted else None
    else:
        offsets = [tensor(a) for a in rest[:tables]]
        indices = [tensor(a) for a in rest[tables:2 * tables]]
        weights = [tensor(a, True) for a in rest[2 * tables:3 * tables]] if weighted else None
    sparse = (indices,) if kind == "fixed" else (offsets, indices)
    return (dense, *sparse) if weights is None else (dense, *sparse, weights)


def tracing_example(config: DLRMConfig) -> list[np.ndarray]:
    """Inputs to export a shape-polymorphic program from. Sizes are 2 (3 for
    B+1 offsets), not 0 or 1, because torch.export specializes dimensions it
    sees as 0 or 1."""
    dtype = np.dtype(config.index_dtype)
    tables = config.num_tables
    return Batch.for_config(
        config, np.zeros((2, config.num_dense), np.float32),
        tuple(np.array([0, 2], dtype) for _ in range(tables)),
        tuple(np.zeros(4, dtype) for _ in range(tables)),
        tuple(np.zeros(4, np.float32) for _ in range(tables)) if config.per_sample_weights else None,
    ).flat()


def dynamic_shapes(config: DLRMConfig) -> tuple[Any, ...]:
    """``torch.export`` dynamic-shape spec: one batch dimension shared by the
    dense input and every offsets tensor (``batch + 1`` with B+1 offsets), and
    an index count per table (one shared count when stacked; a bag length per
    table for fixed-length bags)."""
    from torch.export import Dim

    batch = Dim("batch", min=1, max=2**20)
    offsets_len = batch + 1 if config.include_last_offset else batch
    tables = range(config.num_tables)
    weighted = config.per_sample_weights
    spec: tuple[Any, ...]
    if config.input_layout == "stacked":
        count = Dim("indices", min=0, max=2**24)
        spec = ({0: batch}, {1: offsets_len}, {1: count}) + (({1: count},) if weighted else ())
    elif config.input_layout == "fixed":
        lengths = [Dim(f"bag_{k}", min=1, max=2**16) for k in tables]
        per_table = [{0: batch, 1: length} for length in lengths]
        spec = ({0: batch}, per_table) + ((per_table,) if weighted else ())
    else:
        counts = [Dim(f"indices_{k}", min=0, max=2**24) for k in tables]
        spec = ({0: batch}, [{0: offsets_len} for _ in counts], [{0: c} for c in counts]) \
            + (([{0: c} for c in counts],) if weighted else ())
    return spec
