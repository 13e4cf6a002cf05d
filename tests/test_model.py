"""Hand-computed checks that ``fuzz.model.dlrm`` computes what DLRM's ``sequential_forward`` does.

Every branch a config can select is pinned against small expectations worked out
by hand and written as literals (weights are overwritten after ``build`` so the
numbers are known): sum pooling with empty bags and a last bag that runs to the
end of the indices; fixed (buffer ``v_W_k``) and learned (``v_W_l`` parameter)
weighted pooling; QR tables (``index // c`` into ceil(n/c) quotient rows,
``index % c`` into c remainder rows, combined by mult/add/concat, pooling
weights applied to both halves); MD tables (narrow table plus a bias-free
projection, identity at full width); 8-bit and 4-bit quantized tables; dot
interaction with and without self-interaction (exact ``Zflat`` order) and cat
interaction; where the Sigmoid sits in the bottom and top ``nn.Sequential``; the
output clamp; int32 indices; seed determinism and seed-drawn pooling weights;
``build_reference`` (float64, dequantized rows for quantized tables) against the
float32 model; ``to_torch``; and that ``torch.export.export`` accepts the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from fuzz.model.config import DLRMConfig
from fuzz.model.dlrm import (DLRM, MDTable, PlainTable, QRTable, QuantizedTable, build,
                        build_reference, to_torch)


# ---------------------------------------------------------------- helpers --
def cfg(**overrides: Any) -> DLRMConfig:
    """One table of 4 rows, width 2, dot interaction (2 features -> 2 + 1 = 3)."""
    fields: dict[str, Any] = dict(m_spa=2, ln_emb=(4,), ln_bot=(1, 2), ln_top=(3, 1))
    fields.update(overrides)
    return DLRMConfig(**fields)


def t(values: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def idx(values: Any, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def assign(param: torch.Tensor, values: Any) -> None:
    """Overwrite a parameter/buffer in place, checking the shape is the one given."""
    new = torch.tensor(values, dtype=param.dtype)
    assert tuple(param.shape) == tuple(new.shape), (param.shape, new.shape)
    with torch.no_grad():
        param.copy_(new)


def assert_rows(actual: torch.Tensor, expected: Any, atol: float = 0.0) -> None:
    exp = torch.tensor(expected, dtype=actual.dtype)
    assert actual.shape == exp.shape, (actual.shape, exp.shape)
    torch.testing.assert_close(actual.detach(), exp, atol=atol, rtol=0.0)


PLAIN_ROWS = [[1.0, 2.0], [10.0, 20.0], [100.0, 200.0], [1000.0, 2000.0]]


# ------------------------------------------------------- plain sum pooling --
def test_plain_table_sum_pooling_empty_bag_and_last_bag_runs_to_end() -> None:
    model = build(cfg(), seed=0)
    assert isinstance(model.emb_l[0], PlainTable)
    assign(model.emb_l[0].bag.weight, PLAIN_ROWS)
    # bags: [] | [1, 3] | [0, 2, 2]  (the last bag is indices[2:], to the end)
    (pooled,) = model.apply_emb([idx([0, 0, 2])], [idx([1, 3, 0, 2, 2])])
    assert_rows(pooled, [[0.0, 0.0], [1010.0, 2020.0], [201.0, 402.0]])


def test_plain_table_empty_last_bag_gives_zeros() -> None:
    model = build(cfg(), seed=0)
    assign(model.emb_l[0].bag.weight, PLAIN_ROWS)
    # the last offset equals len(indices): the final bag is empty
    (pooled,) = model.apply_emb([idx([0, 2])], [idx([3, 3])])
    assert_rows(pooled, [[2000.0, 4000.0], [0.0, 0.0]])


def test_no_pooling_weights_without_weighted_pooling() -> None:
    model = build(cfg(), seed=0)
    assert model.pooling_weights(0) is None
    assert not any(name.startswith("v_W") for name, _ in model.named_buffers())
    assert not any(name.startswith("v_W") for name, _ in model.named_parameters())


# ---------------------------------------------------------- weighted pooling --
def test_weighted_pooling_fixed_uses_buffer_gathered_by_index() -> None:
    model = build(cfg(weighted_pooling="fixed"), seed=0)
    buffers = dict(model.named_buffers())
    assert "v_W_0" in buffers
    assert not any(name.startswith("v_W") for name, _ in model.named_parameters())
    assign(model.emb_l[0].bag.weight, PLAIN_ROWS)
    assign(model.v_W_0, [0.5, -1.0, 2.0, 3.0])
    assert model.pooling_weights(0) is model.v_W_0
    (pooled,) = model.apply_emb([idx([0, 0, 2])], [idx([1, 3, 0, 2, 2])])
    # bag1: -1*[10,20] + 3*[1000,2000]; bag2: 0.5*[1,2] + 2*[100,200] + 2*[100,200]
    assert_rows(pooled, [[0.0, 0.0], [2990.0, 5980.0], [400.5, 801.0]])


def test_weighted_pooling_learned_uses_parameter_list() -> None:
    model = build(cfg(weighted_pooling="learned"), seed=0)
    params = dict(model.named_parameters())
    assert "v_W_l.0" in params
    assert isinstance(model.v_W_l, nn.ParameterList)
    assert not any(name.startswith("v_W") for name, _ in model.named_buffers())
    assign(model.emb_l[0].bag.weight, PLAIN_ROWS)
    assign(model.v_W_l[0], [0.5, -1.0, 2.0, 3.0])
    (pooled,) = model.apply_emb([idx([0, 0, 2])], [idx([1, 3, 0, 2, 2])])
    assert_rows(pooled, [[0.0, 0.0], [2990.0, 5980.0], [400.5, 801.0]])
    # A learned weight gets a gradient: d sum(pooled) / d w[i] = count(i) * sum(row i).
    pooled.sum().backward()
    assert_rows(model.v_W_l[0].grad, [3.0, 30.0, 600.0, 3000.0])


@pytest.mark.parametrize("mode", ["fixed", "learned"])
def test_pooling_weights_are_drawn_from_the_seed_not_ones(mode: str) -> None:
    config = cfg(ln_emb=(6, 9), ln_top=(5, 1), weighted_pooling=mode)  # 3 features: 2 + 3
    a, b, c = build(config, 1), build(config, 1), build(config, 2)
    for k, rows in enumerate(config.ln_emb):
        wa = a.pooling_weights(k)
        assert wa is not None and wa.shape == (rows,) and wa.dtype == torch.float32
        assert not torch.all(wa == 1.0)
        assert torch.unique(wa).numel() == rows  # all different, none constant
        assert torch.all(wa.abs() <= 1.0)
        assert torch.equal(wa, b.pooling_weights(k))
        assert not torch.equal(wa, c.pooling_weights(k))


# ------------------------------------------------------------------ QR tables --
QR_Q = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]          # ceil(10 / 4) = 3 rows
QR_R = [[10.0, 20.0], [30.0, 40.0], [50.0, 60.0], [70.0, 80.0]]  # 4 rows


def qr_model(operation: str, **overrides: Any) -> DLRM:
    width = 4 if operation == "concat" else 2
    config = cfg(ln_emb=(10,), qr_flag=True, qr_threshold=9, qr_collisions=4,
                 qr_operation=operation, ln_bot=(1, width), ln_top=(width + 1, 1), **overrides)
    model = build(config, seed=0)
    table = model.emb_l[0]
    assert isinstance(table, QRTable)
    assert tuple(table.weight_q.shape) == (3, 2) and tuple(table.weight_r.shape) == (4, 2)
    assign(table.weight_q, QR_Q)
    assign(table.weight_r, QR_R)
    return model


# bags: [9] | [] | [6, 3]
# 9 -> q=2, r=1 ; 6 -> q=1, r=2 ; 3 -> q=0, r=3
# bag0: q=[5,6], r=[30,40]; bag2: q=[3,4]+[1,2]=[4,6], r=[50,60]+[70,80]=[120,140]
QR_EXPECTED = {
    "mult": [[150.0, 240.0], [0.0, 0.0], [480.0, 840.0]],
    "add": [[35.0, 46.0], [0.0, 0.0], [124.0, 146.0]],
    "concat": [[5.0, 6.0, 30.0, 40.0], [0.0, 0.0, 0.0, 0.0], [4.0, 6.0, 120.0, 140.0]],
}


@pytest.mark.parametrize("operation", ["mult", "add", "concat"])
def test_qr_table_quotient_remainder_split_and_combine(operation: str) -> None:
    model = qr_model(operation)
    (pooled,) = model.apply_emb([idx([0, 1, 1])], [idx([9, 6, 3])])
    assert_rows(pooled, QR_EXPECTED[operation])


def test_qr_mult_multiplies_pooled_sums_not_per_index_products() -> None:
    # (q6 + q3) * (r6 + r3) = [4,6]*[120,140]; sum of per-index products would be
    # [3*50 + 1*70, 4*60 + 2*80] = [220, 400].
    model = qr_model("mult")
    (pooled,) = model.apply_emb([idx([0])], [idx([6, 3])])
    assert_rows(pooled, [[480.0, 840.0]])


def test_qr_pooling_weights_apply_to_both_halves() -> None:
    model = qr_model("mult", weighted_pooling="fixed")
    weights = [0.0] * 10
    weights[9], weights[6], weights[3] = 2.0, 0.5, -1.0
    assign(model.v_W_0, weights)
    (pooled,) = model.apply_emb([idx([0, 1])], [idx([9, 6, 3])])
    # bag0: (2*[5,6]) * (2*[30,40]) = [10,12]*[60,80]
    # bag1: (0.5*[3,4] - [1,2]) * (0.5*[50,60] - [70,80]) = [0.5,0]*[-45,-50]
    assert_rows(pooled, [[600.0, 960.0], [-22.5, 0.0]])


def test_qr_threshold_boundary_rows_equal_threshold_stays_plain() -> None:
    config = cfg(ln_emb=(9, 10), ln_top=(5, 1), qr_flag=True, qr_threshold=9, qr_collisions=4)
    model = build(config, seed=0)
    assert isinstance(model.emb_l[0], PlainTable)
    assert isinstance(model.emb_l[1], QRTable)
    assert tuple(model.emb_l[0].bag.weight.shape) == (9, 2)


def test_qr_ceil_rows_when_collisions_divide_exactly() -> None:
    config = cfg(ln_emb=(12,), qr_flag=True, qr_threshold=9, qr_collisions=4)
    table = build(config, seed=0).emb_l[0]
    assert tuple(table.weight_q.shape) == (3, 2)
    assert tuple(table.weight_r.shape) == (4, 2)


# ------------------------------------------------------------------ MD tables --
def test_md_table_narrow_lookup_then_bias_free_projection() -> None:
    # table 0: 10 rows > 4 -> MD, width 1 projected to 2; table 1: 3 rows -> plain, width 2;
    # table 2: 8 rows > 4 -> MD at full width 2 -> identity projection.
    config = cfg(m_spa=(1, 2, 2), md_flag=True, md_threshold=4, ln_emb=(10, 3, 8),
                 ln_top=(2 + 6, 1))
    model = build(config, seed=0)
    md, plain, full = model.emb_l
    assert isinstance(md, MDTable) and isinstance(plain, PlainTable) and isinstance(full, MDTable)
    assert tuple(md.bag.weight.shape) == (10, 1)
    assert isinstance(md.proj, nn.Linear) and md.proj.bias is None
    assert tuple(md.proj.weight.shape) == (2, 1)
    assert tuple(plain.bag.weight.shape) == (3, 2)
    assert isinstance(full.proj, nn.Identity)
    assign(md.bag.weight, [[float(i + 1)] for i in range(10)])
    assign(md.proj.weight, [[2.0], [-3.0]])
    assign(plain.bag.weight, [[1.0, 0.0], [0.0, 1.0], [5.0, 7.0]])
    assign(full.bag.weight, [[float(i), float(-i)] for i in range(8)])
    ly = model.apply_emb(
        [idx([0, 2]), idx([0, 1]), idx([0, 0])],
        [idx([4, 9, 0]), idx([2, 0, 2]), idx([7, 3])],
    )
    # md: bag0 rows 5+10 = 15 -> [30, -45]; bag1 row 1 -> [2, -3]
    assert_rows(ly[0], [[30.0, -45.0], [2.0, -3.0]])
    assert_rows(ly[1], [[5.0, 7.0], [6.0, 7.0]])   # [2] | [0, 2]
    assert_rows(ly[2], [[0.0, 0.0], [10.0, -10.0]])   # [] | [7, 3], no projection


# ------------------------------------------------------------ interactions --
THREE = dict(ln_emb=(4, 4), ln_bot=(1, 2))  # 3 features of width 2
X = [[1.0, 2.0], [0.0, 1.0]]
LY = [[[3.0, 4.0], [1.0, 0.0]], [[5.0, 6.0], [2.0, -1.0]]]


def test_dot_interaction_strict_lower_triangle_order() -> None:
    model = build(cfg(**THREE, ln_top=(2 + 3, 1)), seed=0)
    r = model.interact_features(t(X), [t(ly) for ly in LY])
    # sample 0: Z[1,0]=1*3+2*4=11, Z[2,0]=1*5+2*6=17, Z[2,1]=3*5+4*6=39
    # sample 1: Z[1,0]=0,         Z[2,0]=-1,          Z[2,1]=2
    assert_rows(r, [[1.0, 2.0, 11.0, 17.0, 39.0], [0.0, 1.0, 0.0, -1.0, 2.0]])


def test_dot_interaction_with_itself_includes_diagonal_in_row_order() -> None:
    model = build(cfg(**THREE, arch_interaction_itself=True, ln_top=(2 + 6, 1)), seed=0)
    r = model.interact_features(t(X), [t(ly) for ly in LY])
    # order: Z00, Z10, Z11, Z20, Z21, Z22
    assert_rows(r, [[1.0, 2.0, 5.0, 11.0, 25.0, 17.0, 39.0, 61.0],
                    [0.0, 1.0, 1.0, 0.0, 1.0, -1.0, 2.0, 5.0]])


def test_cat_interaction_concatenates_x_then_tables() -> None:
    model = build(cfg(**THREE, arch_interaction_op="cat", ln_top=(6, 1)), seed=0)
    r = model.interact_features(t(X), [t(ly) for ly in LY])
    assert_rows(r, [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0, 1.0, 1.0, 0.0, 2.0, -1.0]])


# ------------------------------------------------- MLPs, sigmoid and clamp --
def _kinds(seq: nn.Sequential) -> list[str]:
    return [type(m).__name__ for m in seq]


def test_sigmoid_placement_in_bottom_and_top_mlp() -> None:
    config = cfg(ln_bot=(3, 5, 4, 2), sigmoid_bot=1, ln_top=(3, 6, 1), sigmoid_top=1)
    model = build(config, seed=0)
    assert _kinds(model.bot_l) == ["Linear", "ReLU", "Linear", "Sigmoid", "Linear", "ReLU"]
    assert _kinds(model.top_l) == ["Linear", "ReLU", "Linear", "Sigmoid"]
    assert [(m.in_features, m.out_features) for m in model.bot_l[::2]] == [(3, 5), (5, 4), (4, 2)]
    assert [(m.in_features, m.out_features) for m in model.top_l[::2]] == [(3, 6), (6, 1)]
    assert all(m.bias is not None for m in model.bot_l[::2])
    none = build(cfg(ln_bot=(3, 5, 2), ln_top=(3, 6, 1)), seed=0)
    assert _kinds(none.bot_l) == ["Linear", "ReLU", "Linear", "ReLU"]
    assert _kinds(none.top_l) == ["Linear", "ReLU", "Linear", "ReLU"]
    first = build(cfg(ln_bot=(3, 5, 2), sigmoid_bot=0, ln_top=(3, 6, 1), sigmoid_top=0), seed=0)
    assert _kinds(first.bot_l) == ["Linear", "Sigmoid", "Linear", "ReLU"]
    assert _kinds(first.top_l) == ["Linear", "Sigmoid", "Linear", "ReLU"]


def forward_model(**overrides: Any) -> tuple[DLRM, tuple[torch.Tensor, list, list]]:
    """ln_emb=(3,), width 2, 2 dense features, identity bottom MLP, top W=[1,1,-1], b=0.5."""
    config = cfg(ln_emb=(3,), ln_bot=(2, 2), **overrides)
    model = build(config, seed=0)
    assign(model.bot_l[0].weight, [[1.0, 0.0], [0.0, 1.0]])
    assign(model.bot_l[0].bias, [0.0, 0.0])
    assign(model.emb_l[0].bag.weight, [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    assign(model.top_l[0].weight, [[1.0, 1.0, -1.0]])
    assign(model.top_l[0].bias, [0.5])
    # x = relu(dense) = [[1,2],[0,3]]; ly = [[2,2],[1,1]]; Z10 = [6, 3]
    # top pre-activation: [1+2-6+0.5, 0+3-3+0.5] = [-2.5, 0.5]
    args = (t([[1.0, 2.0], [-1.0, 3.0]]), [idx([0, 1])], [idx([2, 0, 1])])
    return model, args


SIG_M25 = 0.07585818002124355   # 1 / (1 + e^2.5)
SIG_P05 = 0.6224593312018546    # 1 / (1 + e^-0.5)


@pytest.mark.parametrize("threshold, expected", [
    (0.0, [SIG_M25, SIG_P05]),        # no clamp
    (0.05, [SIG_M25, SIG_P05]),       # both inside [0.05, 0.95]
    (0.1, [0.1, SIG_P05]),            # low end clamped
    (0.4, [0.4, 0.6]),                # both ends clamped
    (0.5, [0.5, 0.5]),                # degenerate clamp
])
def test_full_forward_sigmoid_top_and_clamp(threshold: float, expected: list[float]) -> None:
    model, args = forward_model(sigmoid_top=0, loss_threshold=threshold)
    out = model(*args)
    assert_rows(out, [[v] for v in expected], atol=1e-6)


def test_full_forward_relu_top_without_sigmoid() -> None:
    model, args = forward_model()
    assert_rows(model(*args), [[0.0], [0.5]])


def test_full_forward_sigmoid_in_bottom_mlp() -> None:
    model, args = forward_model(sigmoid_bot=0)
    assign(model.bot_l[0].weight, [[0.0, 0.0], [0.0, 0.0]])
    assign(model.bot_l[0].bias, [0.0, float(np.log(3.0))])   # sigmoid -> [0.5, 0.75]
    assign(model.top_l[0].weight, [[2.0, 0.0, 1.0]])
    assign(model.top_l[0].bias, [-1.0])
    # Z10 = [0.5*2 + 0.75*2, 0.5*1 + 0.75*1] = [2.5, 1.25]; top = [1+2.5-1, 1+1.25-1]
    assert_rows(model(*args), [[2.5], [1.25]], atol=1e-6)
    assert_rows(model.bot_l(args[0]), [[0.5, 0.75], [0.5, 0.75]], atol=1e-6)


# --------------------------------------------------------- quantized tables --
def test_quantized_8bit_hand_computed_with_weights_and_empty_bag() -> None:
    model = build(cfg(ln_emb=(3,), quantize_bits=8, weighted_pooling="fixed"), seed=0)
    table = model.emb_l[0]
    assert isinstance(table, QuantizedTable) and table.bits == 8
    # every row spans exactly 255 -> scale 1, bias = row min: exactly representable
    table.packed = torch.ops.quantized.embedding_bag_byte_prepack(
        t([[0.0, 255.0], [10.0, 265.0], [-5.0, 250.0]]))
    assign(model.v_W_0, [0.5, 2.0, -1.0])
    (pooled,) = model.apply_emb([idx([0, 0, 2])], [idx([1, 2, 0, 0])])
    # bags: [] | [1, 2] | [0, 0]
    assert_rows(pooled, [[0.0, 0.0], [25.0, 280.0], [0.0, 255.0]])


def test_quantized_4bit_hand_computed() -> None:
    model = build(cfg(m_spa=4, ln_emb=(3,), ln_bot=(1, 4), ln_top=(5, 1), quantize_bits=4),
                  seed=0)
    table = model.emb_l[0]
    assert isinstance(table, QuantizedTable) and table.bits == 4
    # every row spans exactly 15 -> scale 1
    table.packed = torch.ops.quantized.embedding_bag_4bit_prepack(
        t([[0.0, 15.0, 3.0, 7.0], [1.0, 16.0, 2.0, 8.0], [-3.0, 12.0, 0.0, 4.0]]))
    (pooled,) = model.apply_emb([idx([0, 0, 2])], [idx([1, 2, 0, 0])])
    assert_rows(pooled, [[0.0, 0.0, 0.0, 0.0], [-2.0, 28.0, 2.0, 12.0], [0.0, 30.0, 6.0, 14.0]])


def random_args(config: DLRMConfig, seed: int, batch: int = 4,
                dtype: torch.dtype = torch.int64) -> tuple[torch.Tensor, list, list]:
    """Bags of sizes 0..3 per example (first example's bag empty), last row always hit."""
    gen = np.random.default_rng(seed)
    dense = torch.from_numpy(gen.standard_normal((batch, config.num_dense)).astype(np.float32))
    offsets, indices = [], []
    for rows in config.ln_emb:
        sizes = [0] + list(gen.integers(1, 4, size=batch - 1))
        flat = list(gen.integers(0, rows, size=sum(sizes)))
        flat[-1] = rows - 1
        offsets.append(torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]), dtype=dtype))
        indices.append(torch.tensor(flat, dtype=dtype))
    return dense, offsets, indices


def _to64(args: tuple[torch.Tensor, list, list]) -> tuple[torch.Tensor, list, list]:
    return args[0].double(), args[1], args[2]


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_matches_reference_built_from_dequantized_rows(bits: int) -> None:
    config = cfg(m_spa=4, ln_emb=(7, 12), ln_bot=(3, 4), ln_top=(4 + 3, 2, 1), sigmoid_top=1,
                 quantize_bits=bits, weighted_pooling="fixed")
    model, ref = build(config, 5), build_reference(config, 5)
    unquantized = build(DLRMConfig(**{**config.to_dict(), "quantize_bits": 32}), 5)
    for k in range(config.num_tables):
        q, r = model.emb_l[k], ref.emb_l[k]
        assert isinstance(q, QuantizedTable) and isinstance(r, PlainTable)
        assert r.bag.weight.dtype == torch.float64
        assert torch.equal(r.bag.weight, q.dequantized().double())
        # the reference holds the dequantized rows, not the original float rows
        original = unquantized.emb_l[k].bag.weight
        assert not torch.equal(q.dequantized(), original)
        assert (q.dequantized() - original).abs().max() < (0.1 if bits == 4 else 0.01)
    args = random_args(config, 11)
    ly, ly_ref = model.apply_emb(args[1], args[2]), ref.apply_emb(args[1], args[2])
    for a, b in zip(ly, ly_ref):
        assert a.abs().sum() > 0
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(*args).double(), ref(*_to64(args)), atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------- int32 ----
MIXED = dict(m_spa=(4, 2, 4), md_flag=True, md_threshold=5, qr_flag=True, qr_threshold=11,
             qr_collisions=3, ln_emb=(3, 10, 12), ln_bot=(3, 4), ln_top=(4 + 6, 3, 1),
             sigmoid_top=1)


@pytest.mark.parametrize("overrides", [
    dict(MIXED),
    dict(MIXED, weighted_pooling="fixed"),
    dict(MIXED, weighted_pooling="learned", qr_operation="add"),
    dict(m_spa=4, ln_emb=(5, 8), ln_bot=(3, 4), ln_top=(7, 1), sigmoid_top=0, quantize_bits=8,
         weighted_pooling="fixed"),
    dict(m_spa=4, ln_emb=(5, 8), ln_bot=(3, 4), ln_top=(7, 1), sigmoid_top=0, quantize_bits=4),
], ids=["mixed", "mixed-fixed", "mixed-learned-add", "q8-fixed", "q4"])
def test_int32_indices_give_the_same_result_as_int64(overrides: dict[str, Any]) -> None:
    config = cfg(**overrides)
    model = build(config, 3)
    kinds = {config.table_kind(k) for k in range(config.num_tables)}
    assert kinds == ({"plain", "md", "qr"} if config.qr_flag else {"quantized"})
    a64 = random_args(config, 9, dtype=torch.int64)
    a32 = random_args(config, 9, dtype=torch.int32)
    assert a32[2][0].dtype == torch.int32 and a32[1][0].dtype == torch.int32
    for x, y in zip(model.apply_emb(a64[1], a64[2]), model.apply_emb(a32[1], a32[2])):
        assert torch.equal(x, y)
        assert x.abs().sum() > 0
    out64, out32 = model(*a64), model(*a32)
    assert torch.equal(out64, out32)
    assert not torch.all(out64 == out64[0])   # the examples do differ


# ------------------------------------------------ determinism and reference --
def test_same_seed_same_weights_different_seed_different_weights() -> None:
    config = cfg(**MIXED, weighted_pooling="fixed")
    a, b, c = build(config, 42).state_dict(), build(config, 42).state_dict(), \
        build(config, 43).state_dict()
    assert a.keys() == b.keys() == c.keys()
    assert len(a) > 10
    for name in a:
        assert torch.equal(a[name], b[name]), name
        assert not torch.equal(a[name], c[name]), name


def test_seed_is_reduced_mod_2_32() -> None:
    config = cfg()
    a, b = build(config, 7).state_dict(), build(config, 7 + 2**32).state_dict()
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_build_is_eval_mode_float32() -> None:
    model = build(cfg(**MIXED, weighted_pooling="learned"), 0)
    assert not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("overrides", [
    dict(MIXED, weighted_pooling="fixed"),
    dict(MIXED, weighted_pooling="learned", qr_operation="add", arch_interaction_itself=True,
         ln_top=(4 + 10, 3, 1)),
    dict(m_spa=4, ln_emb=(4, 13), ln_bot=(3, 8, 8), qr_flag=True, qr_operation="concat",
         qr_threshold=3, arch_interaction_op="cat", ln_top=(24, 5, 1), sigmoid_top=1,
         loss_threshold=0.01),
], ids=["mixed-fixed", "mixed-learned-itself", "qr-concat-cat"])
def test_build_reference_is_float64_and_matches_float32(overrides: dict[str, Any]) -> None:
    config = cfg(**overrides)
    model, ref = build(config, 21), build_reference(config, 21)
    assert not ref.training
    ref_state, state = ref.state_dict(), model.state_dict()
    assert ref_state.keys() == state.keys()
    for name, value in ref_state.items():
        assert value.dtype == torch.float64, name
        assert torch.equal(value, state[name].double()), name
    args = random_args(config, 13)
    out, out_ref = model(*args), ref(*_to64(args))
    assert out.dtype == torch.float32 and out_ref.dtype == torch.float64
    assert out_ref.shape == (4, 1)
    torch.testing.assert_close(out.double(), out_ref, atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------- to_torch ---
def test_to_torch_splits_flat_arrays() -> None:
    flat = [np.array([[1.0, 2.0]], dtype=np.float64),
            np.array([0], dtype=np.int32), np.array([0, 1], dtype=np.int32),
            np.array([2, 3], dtype=np.int32), np.array([4], dtype=np.int32)]
    dense, offsets, indices = to_torch(flat, 2)
    assert dense.dtype == torch.float32 and dense.tolist() == [[1.0, 2.0]]
    assert [o.tolist() for o in offsets] == [[0], [0, 1]]
    assert [i.tolist() for i in indices] == [[2, 3], [4]]
    assert all(o.dtype == torch.int32 for o in offsets + indices)
    dense64, _, _ = to_torch(flat, 2, torch.float64)
    assert dense64.dtype == torch.float64


# --------------------------------------------------------------- export ---
def test_torch_export_of_small_model_matches_eager() -> None:
    config = cfg(ln_emb=(5, 7), ln_bot=(3, 2), ln_top=(5, 3, 1), sigmoid_top=1,
                 weighted_pooling="fixed")
    model = build(config, 0)
    args = random_args(config, 2)
    exported = torch.export.export(model, args)
    out = exported.module()(*args)
    torch.testing.assert_close(out, model(*args), atol=0.0, rtol=0.0)
    assert not torch.all(out == out[0])
    # the fixed pooling weights travel as buffers of the exported program
    assert set(exported.graph_signature.inputs_to_buffers.values()) == {"v_W_0", "v_W_1"}
    assert torch.equal(exported.state_dict["v_W_1"], model.v_W_1)
