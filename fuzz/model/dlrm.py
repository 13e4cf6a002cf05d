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

This module composes the model and builds it (``build``, ``build_reference``);
its layers (the table kinds, the MLP, the initial draws) are
``fuzz.model.layers``, and calling and exporting it (``to_torch``,
``to_numpy``, ``tracing_example``, ``dynamic_shapes``) ``fuzz.model.calling``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from fuzz.model.calling import dynamic_shapes, to_numpy, to_torch, tracing_example
from fuzz.model.config import DLRMConfig
from fuzz.model.layers import (Draws, MDTable, PlainTable, QRTable, QuantizedTable, ZeroDraws, mlp,
                               table_weights)

__all__ = ["DLRM", "FixedLengthDLRM", "build", "build_reference", "to_torch", "to_numpy", "tracing_example",
           "dynamic_shapes"]


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
        rng: Draws = ZeroDraws() if seed is None else np.random.RandomState(seed % 2**32)
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
                tables.append(QuantizedTable(table_weights(rows, config.base_width, rng),
                                             config.quantize_bits, last))
            else:
                tables.append(PlainTable(table_weights(rows, config.base_width, rng),
                                         config.pooling, last, config.padding_idx))
        self.emb_l = nn.ModuleList(tables)
        pooling = [torch.from_numpy(rng.uniform(-1.0, 1.0, size=rows).astype(np.float32, copy=False))
                   for rows in config.ln_emb] if config.weighted_pooling else []
        if config.weighted_pooling == "learned":
            self.v_W_l = nn.ParameterList([nn.Parameter(w) for w in pooling])
        else:
            for k, w in enumerate(pooling):
                self.register_buffer(f"v_W_{k}", w)
        self.bot_l = mlp(config.ln_bot, config.sigmoid_bot, rng)
        self.top_l = mlp(config.ln_top, config.sigmoid_top, rng)

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
