"""DLRM's layers as upstream builds them, and where their initial weights
come from: the four embedding-table kinds (``PlainTable``, ``QRTable``,
``MDTable``, ``QuantizedTable``), the MLP (``mlp``, upstream's
``create_mlp``), and the draws they are initialised from (upstream's seeded
``np.random.RandomState``, or ``ZeroDraws`` when only shapes matter). Apart
from ``fuzz.model.dlrm``, which composes them into the model and builds the
model under test and its float64 reference; a new table kind lands here.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Draws", "ZeroDraws", "mlp", "table_weights", "PlainTable", "QRTable", "MDTable",
           "QuantizedTable"]


class Draws(Protocol):
    """Where initial weights come from: ``np.random.RandomState`` (upstream's
    initialisation, seeded), or ``ZeroDraws`` when only the shapes matter."""

    def uniform(self, low: float, high: float, size: Any) -> np.ndarray:
        """Table rows and pooling weights (upstream draws them uniform)."""

    def normal(self, loc: float, scale: float, size: Any) -> np.ndarray:
        """MLP and MD projection weights (upstream draws them Gaussian)."""


class ZeroDraws:
    """Every weight zero, float32 and never drawn: a model that is only
    exported with its weights as inputs needs their shapes, not 10^6 random
    rows (drawing those was most of a 10^6-row export's time)."""

    def uniform(self, low: float, high: float, size: Any) -> np.ndarray:
        """Zeros where a uniform draw would be."""
        return np.zeros(size, np.float32)

    def normal(self, loc: float, scale: float, size: Any) -> np.ndarray:
        """Zeros where a Gaussian draw would be."""
        return np.zeros(size, np.float32)


def mlp(widths: Sequence[int], sigmoid_layer: int, rng: Draws) -> nn.Sequential:
    """DLRM's ``create_mlp``: Linear + ReLU per layer, Sigmoid at ``sigmoid_layer``,
    with DLRM's Gaussian initialisation."""
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        n, m = widths[i], widths[i + 1]
        linear = nn.Linear(n, m, bias=True)
        linear.weight.data = torch.from_numpy(
            rng.normal(0.0, np.sqrt(2 / (m + n)), size=(m, n)).astype(np.float32, copy=False))
        linear.bias.data = torch.from_numpy(rng.normal(0.0, np.sqrt(1 / m), size=m).astype(np.float32, copy=False))
        layers.append(linear)
        layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
    return nn.Sequential(*layers)


def table_weights(rows: int, width: int, rng: Draws) -> torch.Tensor:
    """A table's rows drawn as upstream does: uniform in +-sqrt(1/rows)."""
    bound = np.sqrt(1 / rows)
    return torch.from_numpy(rng.uniform(-bound, bound, size=(rows, width)).astype(np.float32, copy=False))


class PlainTable(nn.Module):
    """``nn.EmbeddingBag``: DLRM's default table (``mode="sum"``), or a
    descendant's variant (mean/max pooling, B+1 offsets, a padding row). The
    padding row keeps its seed-drawn data: a lowering that forgets to skip it
    must not be rescued by a row of zeros."""

    def __init__(self, weight: torch.Tensor, mode: str = "sum", include_last_offset: bool = False,
                 padding_idx: int | None = None) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(weight.shape[0], weight.shape[1], mode=mode,
                                   include_last_offset=include_last_offset,
                                   padding_idx=padding_idx, _weight=weight)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor | None,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        """Pool one table's bags through ``nn.EmbeddingBag``, as upstream does."""
        return self.bag(indices, offsets, per_sample_weights=per_sample_weights)


class QRTable(nn.Module):
    """DLRM's ``QREmbeddingBag``: a quotient table of ceil(n/c) rows looked up by
    ``(index / c).long()`` (float division, truncated: upstream's ops) and a
    remainder table of c rows looked up by ``remainder(index, c).long()``,
    combined by ``operation``."""

    def __init__(self, rows: int, width: int, collisions: int, operation: str,
                 rng: Draws, mode: str = "sum",
                 include_last_offset: bool = False) -> None:
        super().__init__()
        self.collisions = collisions
        self.operation = operation
        self.mode = mode
        self.include_last_offset = include_last_offset
        self.weight_q = nn.Parameter(table_weights(-(-rows // collisions), width, rng))
        self.weight_r = nn.Parameter(table_weights(collisions, width, rng))

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor | None,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        """Look up quotient and remainder tables with upstream's ops and combine them."""
        quotient = (indices / self.collisions).long()
        remainder = torch.remainder(indices, self.collisions).long()
        # include_last_offset is only passed when set: upstream's call has none.
        extra = {"include_last_offset": True} if self.include_last_offset else {}
        embed_q = F.embedding_bag(quotient, self.weight_q, offsets, mode=self.mode,
                                  per_sample_weights=per_sample_weights, **extra)
        embed_r = F.embedding_bag(remainder, self.weight_r, offsets, mode=self.mode,
                                  per_sample_weights=per_sample_weights, **extra)
        if self.operation == "concat":
            return torch.cat((embed_q, embed_r), dim=1)
        if self.operation == "add":
            return embed_q + embed_r
        return embed_q * embed_r


class MDTable(nn.Module):
    """DLRM's ``PrEmbeddingBag``: a narrow table followed by a bias-free linear
    projection up to the base width (identity when already that wide)."""

    def __init__(self, rows: int, width: int, base: int, rng: Draws,
                 include_last_offset: bool = False) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(rows, width, mode="sum", include_last_offset=include_last_offset,
                                   _weight=table_weights(rows, width, rng))
        self.proj: nn.Module = nn.Identity()
        if width < base:
            proj = nn.Linear(width, base, bias=False)
            proj.weight.data = torch.from_numpy(
                rng.normal(0.0, np.sqrt(2 / (width + base)), size=(base, width)).astype(np.float32, copy=False))
            self.proj = proj

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor | None,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        """Pool the narrow table, then project it up to the base width."""
        return self.proj(self.bag(indices, offsets, per_sample_weights=per_sample_weights))


class QuantizedTable(nn.Module):
    """DLRM's ``quantize_embedding``: rowwise 8-bit or 4-bit prepacked weights,
    looked up with ``quantized::embedding_bag_{byte,4bit}_rowwise_offsets``."""

    def __init__(self, weight: torch.Tensor, bits: int, include_last_offset: bool = False) -> None:
        super().__init__()
        self.bits = bits
        self.include_last_offset = include_last_offset
        pack = torch.ops.quantized.embedding_bag_byte_prepack if bits == 8 \
            else torch.ops.quantized.embedding_bag_4bit_prepack
        self.register_buffer("packed", pack(weight))

    def dequantized(self) -> torch.Tensor:
        """The float32 rows the quantized kernel sums (for the float64 reference)."""
        unpack = torch.ops.quantized.embedding_bag_byte_unpack if self.bits == 8 \
            else torch.ops.quantized.embedding_bag_4bit_unpack
        return unpack(self.packed)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor | None,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        """Pool from the prepacked rows with the quantized rowwise kernel."""
        op = torch.ops.quantized.embedding_bag_byte_rowwise_offsets if self.bits == 8 \
            else torch.ops.quantized.embedding_bag_4bit_rowwise_offsets
        extra = {"include_last_offset": True} if self.include_last_offset else {}
        return op(self.packed, indices, offsets, per_sample_weights=per_sample_weights, **extra)
