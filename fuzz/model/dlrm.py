"""DLRM as an eager ``nn.Module`` that computes exactly what
``DLRM_Net.sequential_forward`` computes, for every code path a config selects.

The module is the program under test (exported, lowered, compiled) and, built
in float64, the reference it is judged against. Every parameter and buffer is
drawn from the seed, per-table pooling weights included: DLRM's defaults
(pooling weights of ones) would let a lowering that ignores the weights give
the right answer.

Where upstream's choice of ops differs from a shorter spelling, upstream's is
kept (the compiler must see what DLRM hands it): the QR quotient is
``(indices / c).long()``, a float true division then a float-to-int
truncation, not an exact floor division; a stacked 2-D input is iterated and
indexed as ``apply_emb`` does. ``tests/test_model_ops.py`` pins the exported
ATen ops of every branch against lists written from upstream's source.

``dtype`` float16/bfloat16 casts the weights after drawing them in float32
(same seed, same values, rounded); the model still takes float32 dense
features and per-sample weights and returns float32, converting at its edges,
so inputs and outputs stay plain numpy arrays (numpy has no bfloat16). The
float64 reference rounds its inputs to ``dtype`` the same way before computing
in float64: it is the exact value of the model that was compiled.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fuzz.model.config import DLRMConfig


__all__ = ["DLRM", "FixedLengthDLRM", "build", "build_reference", "to_torch", "to_numpy", "tracing_example",
           "dynamic_shapes"]


class _Draws(Protocol):
    """Where initial weights come from: ``np.random.RandomState`` (upstream's
    initialisation, seeded), or ``_ZeroDraws`` when only the shapes matter."""

    def uniform(self, low: float, high: float, size: Any) -> np.ndarray: ...

    def normal(self, loc: float, scale: float, size: Any) -> np.ndarray: ...


class _ZeroDraws:
    """Every weight zero, float32 and never drawn: a model that is only
    exported with its weights as inputs needs their shapes, not 10^6 random
    rows (drawing those was most of a 10^6-row export's time)."""

    def uniform(self, low: float, high: float, size: Any) -> np.ndarray:
        return np.zeros(size, np.float32)

    def normal(self, loc: float, scale: float, size: Any) -> np.ndarray:
        return np.zeros(size, np.float32)


def _mlp(widths: Sequence[int], sigmoid_layer: int, rng: _Draws) -> nn.Sequential:
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


def _table_weights(rows: int, width: int, rng: _Draws) -> torch.Tensor:
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
                 rng: _Draws, mode: str = "sum",
                 include_last_offset: bool = False) -> None:
        super().__init__()
        self.collisions = collisions
        self.operation = operation
        self.mode = mode
        self.include_last_offset = include_last_offset
        self.weight_q = nn.Parameter(_table_weights(-(-rows // collisions), width, rng))
        self.weight_r = nn.Parameter(_table_weights(collisions, width, rng))

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

    def __init__(self, rows: int, width: int, base: int, rng: _Draws,
                 include_last_offset: bool = False) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(rows, width, mode="sum", include_last_offset=include_last_offset,
                                   _weight=_table_weights(rows, width, rng))
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


_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                 "float64": torch.float64}


def _cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # Decided in Python, so a float32 model exports no conversion op at all.
    return x if x.dtype == dtype else x.to(dtype)


class DLRM(nn.Module):
    """``DLRM_Net`` restricted to ``sequential_forward``. Sparse inputs come in
    the config's ``input_layout``: per-table sequences of offsets and indices
    (tables may differ in index count), offsets and indices stacked into 2-D
    tensors, or per-table 2-D indices with ``offsets`` None. ``per_sample_weights``
    (only with the knob of that name) is laid out like the indices."""

    def __init__(self, config: DLRMConfig, seed: int | None) -> None:
        super().__init__()
        self.config = config
        # The dtype inputs are rounded to, the dtype arithmetic runs in and the
        # dtype of the output: config dtype / config dtype / float32 for the
        # model under test, config dtype / float64 / float64 for the reference.
        self.input_dtype = _TORCH_DTYPES[config.dtype]
        self.compute_dtype = self.input_dtype
        self.output_dtype = torch.float32
        rng: _Draws = _ZeroDraws() if seed is None else np.random.RandomState(seed % 2**32)
        last = config.include_last_offset
        tables: list[nn.Module] = []
        for k, rows in enumerate(config.ln_emb):
            kind = config.table_kind(k)
            if kind == "qr":
                tables.append(QRTable(rows, config.base_width, config.qr_collisions,
                                      config.qr_operation, rng, config.pooling, last))
            elif kind == "md":
                tables.append(MDTable(rows, config.table_width(k), config.base_width, rng, last))
            elif kind == "quantized":
                tables.append(QuantizedTable(_table_weights(rows, config.base_width, rng),
                                             config.quantize_bits, last))
            else:
                tables.append(PlainTable(_table_weights(rows, config.base_width, rng),
                                         config.pooling, last, config.padding_idx))
        self.emb_l = nn.ModuleList(tables)
        pooling = [torch.from_numpy(rng.uniform(-1.0, 1.0, size=rows).astype(np.float32, copy=False))
                   for rows in config.ln_emb] if config.weighted_pooling else []
        if config.weighted_pooling == "learned":
            self.v_W_l = nn.ParameterList([nn.Parameter(w) for w in pooling])
        else:
            for k, w in enumerate(pooling):
                self.register_buffer(f"v_W_{k}", w)
        self.bot_l = _mlp(config.ln_bot, config.sigmoid_bot, rng)
        self.top_l = _mlp(config.ln_top, config.sigmoid_top, rng)

    def pooling_weights(self, k: int) -> torch.Tensor | None:
        """Table ``k``'s per-row pooling weights (learned or fixed), or None without the knob."""
        if self.config.weighted_pooling == "learned":
            return self.v_W_l[k]
        if self.config.weighted_pooling == "fixed":
            return getattr(self, f"v_W_{k}")
        return None

    def _input(self, x: torch.Tensor) -> torch.Tensor:
        """A float input as the model sees it: rounded to ``dtype``, computed on in
        ``compute_dtype``."""
        return _cast(_cast(x, self.input_dtype), self.compute_dtype)

    def apply_emb(self, lS_o: Any, lS_i: Any, weights: Any = None) -> list[torch.Tensor]:
        """Pool every table's bags, weighting samples when a knob asks: upstream's loop."""
        # Upstream's loop: iterate the indices (a list, or a 2-D tensor's rows)
        # and index the offsets with k (a list item, or a row of a 2-D tensor).
        pooled = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = None if lS_o is None else lS_o[k]
            v_w = self.pooling_weights(k)
            if v_w is not None:
                per_sample_weights = v_w.gather(0, sparse_index_group_batch)
            elif weights is not None:
                per_sample_weights = self._input(weights[k])
            else:
                per_sample_weights = None
            pooled.append(self.emb_l[k](sparse_index_group_batch, sparse_offset_group_batch,
                                        per_sample_weights))
        return pooled

    def interact_features(self, x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
        """Combine dense and pooled features: concatenation, or upstream's pairwise dots."""
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

    def forward(self, dense_x: torch.Tensor, offsets: Any, indices: Any,
                per_sample_weights: Any = None) -> torch.Tensor:
        """Bottom MLP, embeddings, interaction, top MLP (clamped by the loss threshold)."""
        x = self.bot_l(self._input(dense_x))
        ly = self.apply_emb(offsets, indices, per_sample_weights)
        z = self.interact_features(x, ly)
        p = self.top_l(z)
        t = self.config.loss_threshold
        if 0.0 < t < 1.0:
            p = torch.clamp(p, min=t, max=1.0 - t)
        return _cast(p, self.output_dtype)


class FixedLengthDLRM(DLRM):
    """``input_layout='fixed'``: upstream is called with offsets that are all
    None (``lS_o[k]`` is None, ``lS_i[k]`` a ``[B, L]`` tensor). Here the None
    is bound inside rather than passed: same ops, but no ``None`` input in the
    exported signature, which torch-mlir 20261001 cannot import (its
    ``func.func`` keeps a ``!torch.none`` argument that no backend
    legalizes) and which would hide every fixed-length program behind that one
    failure."""

    def forward(self, dense_x: torch.Tensor, indices: Any,  # type: ignore[override]
                per_sample_weights: Any = None) -> torch.Tensor:
        """Take no offsets input and pass None inside, so the export has no None argument."""
        return super().forward(dense_x, None, indices, per_sample_weights)


_QUANTIZE_MLP = {"qint8": "qint8", "float16": "float16"}


def build(config: DLRMConfig, seed: int | None) -> DLRM:
    """The model under test, in eval mode, weights drawn from ``seed`` (in
    float32, then rounded to ``config.dtype``; seed None: every weight zero,
    for exporting with weights as inputs, where only shapes count); with ``quantize_mlp``, every
    ``nn.Linear`` dynamically quantized as upstream's ``quantize_mlp_with_bit``
    does (``torch.quantization.quantize_dynamic(dlrm, {nn.Linear}, dtype)``)."""
    model = _build(config, seed)
    if config.quantize_mlp == "none":
        return model
    import warnings

    with warnings.catch_warnings():  # torch.ao announces its move to torchao
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(
            model, {nn.Linear}, getattr(torch, _QUANTIZE_MLP[config.quantize_mlp]))
    assert isinstance(quantized, DLRM)  # quantize_dynamic copies the module, class and all
    return quantized.eval()


def _build(config: DLRMConfig, seed: int | None) -> DLRM:
    model = (FixedLengthDLRM if config.input_layout == "fixed" else DLRM)(config, seed).eval()
    if config.dtype != "float32":
        model = model.to(_TORCH_DTYPES[config.dtype])
    return model


def _dequantized_linear_weight(module: nn.Module, kind: str) -> torch.Tensor:
    """The float weight a dynamically quantized ``nn.Linear`` multiplies by."""
    weight = module.weight()  # type: ignore[operator]
    return weight.dequantize() if kind == "qint8" else weight.float()


def build_reference(config: DLRMConfig, seed: int) -> DLRM:
    """The same model in float64: the reference every output is judged against.

    Quantized tables cannot run in float64, so they become plain tables holding
    exactly the dequantized rows the quantized kernel sums; a quantized MLP
    becomes float64 ``nn.Linear`` layers holding its dequantized weights (the
    activations' dynamic quantization is a rounding of the model, like
    float32's, left to the tolerance). Inputs are rounded to ``config.dtype``
    first, so float16 and bfloat16 models are judged on the inputs they saw.
    """
    model = _build(config, seed)
    if config.quantize_mlp != "none":
        quantized = build(config, seed)
        mine = dict(model.named_modules())
        for name, module in quantized.named_modules():
            if type(module).__name__ == "Linear" and type(module).__module__.startswith(
                    "torch.ao.nn.quantized"):
                with torch.no_grad():
                    mine[name].weight.copy_(_dequantized_linear_weight(module, config.quantize_mlp))
    for k, table in enumerate(model.emb_l):
        if isinstance(table, QuantizedTable):
            model.emb_l[k] = PlainTable(table.dequantized(), include_last_offset=table.include_last_offset)
    model = model.to(torch.float64)
    model.compute_dtype = torch.float64
    model.output_dtype = torch.float64
    return model


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
    from fuzz.model.sample import Batch

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
