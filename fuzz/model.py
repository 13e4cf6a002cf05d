"""DLRM as an eager ``nn.Module`` that computes exactly what
``DLRM_Net.sequential_forward`` computes, for every code path a config selects.

The module is the program under test (exported, lowered, compiled) and, built
in float64, the reference it is judged against. Every parameter and buffer is
drawn from the seed, per-table pooling weights included: DLRM's defaults
(pooling weights of ones) would let a lowering that ignores the weights give
the right answer.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fuzz.config import DLRMConfig

__all__ = ["DLRM", "build", "build_reference", "to_torch", "tracing_example", "dynamic_shapes"]


def _mlp(widths: Sequence[int], sigmoid_layer: int, rng: np.random.RandomState) -> nn.Sequential:
    """DLRM's ``create_mlp``: Linear + ReLU per layer, Sigmoid at ``sigmoid_layer``,
    with DLRM's Gaussian initialisation."""
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        n, m = widths[i], widths[i + 1]
        linear = nn.Linear(n, m, bias=True)
        linear.weight.data = torch.from_numpy(
            rng.normal(0.0, np.sqrt(2 / (m + n)), size=(m, n)).astype(np.float32))
        linear.bias.data = torch.from_numpy(rng.normal(0.0, np.sqrt(1 / m), size=m).astype(np.float32))
        layers.append(linear)
        layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
    return nn.Sequential(*layers)


def _table_weights(rows: int, width: int, rng: np.random.RandomState) -> torch.Tensor:
    bound = np.sqrt(1 / rows)
    return torch.from_numpy(rng.uniform(-bound, bound, size=(rows, width)).astype(np.float32))


class PlainTable(nn.Module):
    """``nn.EmbeddingBag(mode="sum")``: DLRM's default table."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(weight.shape[0], weight.shape[1], mode="sum", _weight=weight)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        return self.bag(indices, offsets, per_sample_weights=per_sample_weights)


class QRTable(nn.Module):
    """DLRM's ``QREmbeddingBag``: a quotient table of ceil(n/c) rows looked up by
    ``index // c`` and a remainder table of c rows looked up by ``index % c``,
    combined by ``operation``."""

    def __init__(self, rows: int, width: int, collisions: int, operation: str,
                 rng: np.random.RandomState) -> None:
        super().__init__()
        self.collisions = collisions
        self.operation = operation
        self.weight_q = nn.Parameter(_table_weights(-(-rows // collisions), width, rng))
        self.weight_r = nn.Parameter(_table_weights(collisions, width, rng))

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        quotient = torch.div(indices, self.collisions, rounding_mode="floor")
        remainder = torch.remainder(indices, self.collisions)
        embed_q = F.embedding_bag(quotient, self.weight_q, offsets, mode="sum",
                                  per_sample_weights=per_sample_weights)
        embed_r = F.embedding_bag(remainder, self.weight_r, offsets, mode="sum",
                                  per_sample_weights=per_sample_weights)
        if self.operation == "concat":
            return torch.cat((embed_q, embed_r), dim=1)
        if self.operation == "add":
            return embed_q + embed_r
        return embed_q * embed_r


class MDTable(nn.Module):
    """DLRM's ``PrEmbeddingBag``: a narrow table followed by a bias-free linear
    projection up to the base width (identity when already that wide)."""

    def __init__(self, rows: int, width: int, base: int, rng: np.random.RandomState) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(rows, width, mode="sum", _weight=_table_weights(rows, width, rng))
        self.proj: nn.Module = nn.Identity()
        if width < base:
            proj = nn.Linear(width, base, bias=False)
            proj.weight.data = torch.from_numpy(
                rng.normal(0.0, np.sqrt(2 / (width + base)), size=(base, width)).astype(np.float32))
            self.proj = proj

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        return self.proj(self.bag(indices, offsets, per_sample_weights=per_sample_weights))


class QuantizedTable(nn.Module):
    """DLRM's ``quantize_embedding``: rowwise 8-bit or 4-bit prepacked weights,
    looked up with ``quantized::embedding_bag_{byte,4bit}_rowwise_offsets``."""

    def __init__(self, weight: torch.Tensor, bits: int) -> None:
        super().__init__()
        self.bits = bits
        pack = torch.ops.quantized.embedding_bag_byte_prepack if bits == 8 \
            else torch.ops.quantized.embedding_bag_4bit_prepack
        self.register_buffer("packed", pack(weight))

    def dequantized(self) -> torch.Tensor:
        """The float32 rows the quantized kernel sums (for the float64 reference)."""
        unpack = torch.ops.quantized.embedding_bag_byte_unpack if self.bits == 8 \
            else torch.ops.quantized.embedding_bag_4bit_unpack
        return unpack(self.packed)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor,
                per_sample_weights: torch.Tensor | None) -> torch.Tensor:
        op = torch.ops.quantized.embedding_bag_byte_rowwise_offsets if self.bits == 8 \
            else torch.ops.quantized.embedding_bag_4bit_rowwise_offsets
        return op(self.packed, indices, offsets, per_sample_weights=per_sample_weights)


class DLRM(nn.Module):
    """``DLRM_Net`` restricted to ``sequential_forward``, taking per-table
    sequences of offsets and indices (tables may differ in index count)."""

    def __init__(self, config: DLRMConfig, seed: int) -> None:
        super().__init__()
        self.config = config
        rng = np.random.RandomState(seed % 2**32)
        tables: list[nn.Module] = []
        for k, rows in enumerate(config.ln_emb):
            kind = config.table_kind(k)
            if kind == "qr":
                tables.append(QRTable(rows, config.base_width, config.qr_collisions,
                                      config.qr_operation, rng))
            elif kind == "md":
                tables.append(MDTable(rows, config.table_width(k), config.base_width, rng))
            elif kind == "quantized":
                tables.append(QuantizedTable(_table_weights(rows, config.base_width, rng),
                                             config.quantize_bits))
            else:
                tables.append(PlainTable(_table_weights(rows, config.base_width, rng)))
        self.emb_l = nn.ModuleList(tables)
        pooling = [torch.from_numpy(rng.uniform(-1.0, 1.0, size=rows).astype(np.float32))
                   for rows in config.ln_emb] if config.weighted_pooling else []
        if config.weighted_pooling == "learned":
            self.v_W_l = nn.ParameterList([nn.Parameter(w) for w in pooling])
        else:
            for k, w in enumerate(pooling):
                self.register_buffer(f"v_W_{k}", w)
        self.bot_l = _mlp(config.ln_bot, config.sigmoid_bot, rng)
        self.top_l = _mlp(config.ln_top, config.sigmoid_top, rng)

    def pooling_weights(self, k: int) -> torch.Tensor | None:
        if self.config.weighted_pooling == "learned":
            return self.v_W_l[k]
        if self.config.weighted_pooling == "fixed":
            return getattr(self, f"v_W_{k}")
        return None

    def apply_emb(self, offsets: Sequence[torch.Tensor],
                  indices: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        pooled = []
        for k, table in enumerate(self.emb_l):
            v_w = self.pooling_weights(k)
            per_sample_weights = None if v_w is None else v_w.gather(0, indices[k])
            pooled.append(table(indices[k], offsets[k], per_sample_weights))
        return pooled

    def interact_features(self, x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
        if self.config.arch_interaction_op == "cat":
            return torch.cat([x] + ly, dim=1)
        batch_size, d = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        _, ni, nj = Z.shape
        offset = 1 if self.config.arch_interaction_itself else 0
        li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
        lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
        Zflat = Z[:, li, lj]
        return torch.cat([x] + [Zflat], dim=1)

    def forward(self, dense_x: torch.Tensor, offsets: list[torch.Tensor],
                indices: list[torch.Tensor]) -> torch.Tensor:
        x = self.bot_l(dense_x)
        ly = self.apply_emb(offsets, indices)
        z = self.interact_features(x, ly)
        p = self.top_l(z)
        t = self.config.loss_threshold
        if 0.0 < t < 1.0:
            return torch.clamp(p, min=t, max=1.0 - t)
        return p


def build(config: DLRMConfig, seed: int) -> DLRM:
    """The float32 model under test, in eval mode, weights drawn from ``seed``."""
    return DLRM(config, seed).eval()


def build_reference(config: DLRMConfig, seed: int) -> DLRM:
    """The same model in float64: the reference every output is judged against.

    Quantized tables cannot run in float64, so they become plain tables holding
    exactly the dequantized rows the quantized kernel sums.
    """
    model = build(config, seed)
    for k, table in enumerate(model.emb_l):
        if isinstance(table, QuantizedTable):
            model.emb_l[k] = PlainTable(table.dequantized())
    return model.to(torch.float64)


def to_torch(arrays: Sequence[np.ndarray], num_tables: int,
             dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Turn a flat input list (dense, offsets..., indices...) into forward's arguments."""
    dense = torch.from_numpy(np.ascontiguousarray(arrays[0])).to(dtype)
    offsets = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays[1:1 + num_tables]]
    indices = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays[1 + num_tables:1 + 2 * num_tables]]
    return dense, offsets, indices


def tracing_example(config: DLRMConfig) -> list[np.ndarray]:
    """Inputs to export a shape-polymorphic program from. Sizes are 2, not 0 or
    1, because torch.export specializes dimensions it sees as 0 or 1."""
    dtype = np.dtype(config.index_dtype)
    return ([np.zeros((2, config.num_dense), np.float32)]
            + [np.array([0, 1], dtype) for _ in config.ln_emb]
            + [np.zeros(2, dtype) for _ in config.ln_emb])


def dynamic_shapes(config: DLRMConfig) -> tuple[Any, ...]:
    """``torch.export`` dynamic-shape spec: one batch dimension shared by the
    dense input and every offsets tensor, and an index count per table."""
    from torch.export import Dim

    batch = Dim("batch", min=1, max=2**20)
    counts = [Dim(f"indices_{k}", min=0, max=2**24) for k in range(config.num_tables)]
    return ({0: batch}, [{0: batch} for _ in counts], [{0: count} for count in counts])
