"""Hand-computed checks of the knobs beyond ``DLRM_Net``'s constructor: mean
and max pooling, B+1 offsets, a padding row holding non-zero data, per-sample
weights as an input, the stacked and fixed-length input layouts (equal to the
per-table layout), float16/bfloat16 models and their float64 reference (inputs
rounded to the dtype), the dynamically quantized MLP and its reference, and
upstream's float32 QR quotient at and beyond 2**24.

As in ``test_model.py``: weights are overwritten after ``build`` with small
known values, and the expectations are literals worked out by hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fuzz.model.config import DLRMConfig
from fuzz.model.dlrm import PlainTable, QRTable, build, build_reference, to_torch
from fuzz.model.sample import Batch, InvalidSample, Sample, qr_quotient
from strategies.inputs import top_index


def cfg(**overrides: Any) -> DLRMConfig:
    """One table of 4 rows, width 2, dot interaction."""
    fields: dict[str, Any] = dict(m_spa=2, ln_emb=(4,), ln_bot=(1, 2), ln_top=(3, 1))
    fields.update(overrides)
    return DLRMConfig(**fields)


def idx(values: Any, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def assign(param: torch.Tensor, values: Any) -> None:
    new = torch.tensor(values, dtype=param.dtype)
    assert tuple(param.shape) == tuple(new.shape), (param.shape, new.shape)
    with torch.no_grad():
        param.copy_(new)


def assert_rows(actual: torch.Tensor, expected: Any) -> None:
    exp = torch.tensor(expected, dtype=actual.dtype)
    assert actual.shape == exp.shape, (actual.shape, exp.shape)
    torch.testing.assert_close(actual.detach(), exp, atol=0.0, rtol=0.0)


ROWS = [[1.0, 2.0], [10.0, 20.0], [100.0, 200.0], [1000.0, 2000.0]]
# bags: [] | [1, 3] | [0, 2, 2]
OFFSETS, INDICES = [0, 0, 2], [1, 3, 0, 2, 2]


def table_model(**overrides: Any) -> Any:
    model = build(cfg(**overrides), seed=0)
    assert isinstance(model.emb_l[0], PlainTable)
    assign(model.emb_l[0].bag.weight, ROWS)
    return model


# ---------------------------------------------------------------- pooling --
@pytest.mark.parametrize("mode, expected", [
    ("sum", [[0.0, 0.0], [1010.0, 2020.0], [201.0, 402.0]]),
    ("mean", [[0.0, 0.0], [505.0, 1010.0], [67.0, 134.0]]),      # (1 + 100 + 100) / 3 = 67
    ("max", [[0.0, 0.0], [1000.0, 2000.0], [100.0, 200.0]]),     # an empty bag gives zeros
])
def test_pooling_modes(mode: str, expected: list[list[float]]) -> None:
    model = table_model(pooling=mode)
    (pooled,) = model.apply_emb([idx(OFFSETS)], [idx(INDICES)])
    assert_rows(pooled, expected)


def test_mean_of_two_rows_is_their_average() -> None:
    model = table_model(pooling="mean")
    (pooled,) = model.apply_emb([idx([0])], [idx([0, 1])])
    assert_rows(pooled, [[5.5, 11.0]])


def test_max_pooling_takes_the_max_per_column_not_per_row() -> None:
    model = table_model(pooling="max")
    assign(model.emb_l[0].bag.weight, [[5.0, -1.0], [-3.0, 4.0], [0.0, 0.0], [0.0, 0.0]])
    (pooled,) = model.apply_emb([idx([0])], [idx([0, 1])])
    assert_rows(pooled, [[5.0, 4.0]])


# ----------------------------------------------------------- B+1 offsets --
def test_include_last_offset_takes_b_plus_one_offsets() -> None:
    model = table_model(include_last_offset=True)
    # the same three bags, the last offset closing the last bag: [0, 0, 2, 5]
    (pooled,) = model.apply_emb([idx(OFFSETS + [5])], [idx(INDICES)])
    assert_rows(pooled, [[0.0, 0.0], [1010.0, 2020.0], [201.0, 402.0]])
    # a last offset short of the end leaves the tail out of every bag
    (cut,) = model.apply_emb([idx([0, 0, 2, 4])], [idx(INDICES)])
    assert_rows(cut, [[0.0, 0.0], [1010.0, 2020.0], [101.0, 202.0]])


def test_include_last_offset_batch_appends_the_index_count() -> None:
    config = cfg(include_last_offset=True)
    batch = Batch.for_config(config, np.zeros((3, 1), np.float32), (np.array(OFFSETS),),
                             (np.array(INDICES),))
    assert [a.tolist() for a in batch.flat()[1:]] == [[0, 0, 2, 5], INDICES]


# ------------------------------------------------------------ padding row --
@pytest.mark.parametrize("mode, expected", [
    ("sum", [[0.0, 0.0], [1010.0, 2020.0], [1.0, 2.0]]),
    ("mean", [[0.0, 0.0], [505.0, 1010.0], [1.0, 2.0]]),  # padding not counted in the mean
    ("max", [[0.0, 0.0], [1000.0, 2000.0], [1.0, 2.0]]),
])
def test_padding_row_is_skipped_though_it_holds_data(mode: str, expected: Any) -> None:
    model = table_model(padding_idx=2, pooling=mode)
    assert torch.all(model.emb_l[0].bag.weight[2] == torch.tensor([100.0, 200.0]))
    (pooled,) = model.apply_emb([idx(OFFSETS)], [idx(INDICES)])
    assert_rows(pooled, expected)


def test_padding_row_keeps_its_seed_drawn_data() -> None:
    model = build(cfg(padding_idx=1), seed=3)
    assert torch.all(model.emb_l[0].bag.weight[1] != 0.0)


# ----------------------------------------------------- per-sample weights --
def test_per_sample_weights_given_as_input() -> None:
    model = table_model(per_sample_weights=True)
    weights = torch.tensor([-1.0, 3.0, 0.5, 2.0, 2.0])
    (pooled,) = model.apply_emb([idx(OFFSETS)], [idx(INDICES)], [weights])
    # bag1: -1*[10,20] + 3*[1000,2000]; bag2: 0.5*[1,2] + 2*[100,200] + 2*[100,200]
    assert_rows(pooled, [[0.0, 0.0], [2990.0, 5980.0], [400.5, 801.0]])


def test_per_sample_weights_travel_as_the_fourth_argument() -> None:
    config = cfg(per_sample_weights=True)
    batch = Batch.for_config(config, np.ones((3, 1), np.float32), (np.array(OFFSETS),),
                             (np.array(INDICES),), (np.array([-1, 3, .5, 2, 2], np.float32),))
    args = to_torch(batch.flat(), config)
    assert len(args) == 4 and args[3][0].tolist() == [-1.0, 3.0, 0.5, 2.0, 2.0]
    model = table_model(per_sample_weights=True)
    unweighted = table_model()
    assert not torch.equal(model(*args), unweighted(*args[:3]))


# --------------------------------------------------------------- layouts --
TWO = dict(ln_emb=(6, 9), ln_bot=(3, 4, 2), ln_top=(5, 3, 1), sigmoid_top=1)


def _same_bags(config: DLRMConfig) -> Batch:
    """Four examples, two bags of two in every table (fits every layout)."""
    rng = np.random.default_rng(4)
    dense = rng.standard_normal((4, 3)).astype(np.float32)
    offsets = tuple(np.array([0, 2, 4, 6]) for _ in config.ln_emb)
    indices = (np.array([5, 0, 1, 1, 2, 3, 4, 5]), np.array([8, 7, 0, 3, 3, 3, 1, 2]))
    weights = (rng.uniform(-1, 2, 8).astype(np.float32),) * 2
    return Batch.for_config(config, dense, offsets, indices, weights)


@pytest.mark.parametrize("layout", ["stacked", "fixed"])
@pytest.mark.parametrize("extra", [{}, {"per_sample_weights": True}, {"qr_flag": True,
                                                                       "qr_threshold": 7}],
                         ids=["plain", "weights", "qr"])
def test_2d_layouts_equal_the_per_table_layout(layout: str, extra: dict[str, Any]) -> None:
    lists, other = cfg(**TWO, **extra), cfg(**TWO, **extra, input_layout=layout)
    a, b = _same_bags(lists), _same_bags(other)
    shapes = [list(x.shape) for x in b.flat()]
    if layout == "stacked":
        assert shapes[1:3] == [[2, 4], [2, 8]]
    else:
        assert shapes[1:3] == [[4, 2], [4, 2]]
    out_lists = build(lists, 8)(*to_torch(a.flat(), lists))
    out_other = build(other, 8)(*to_torch(b.flat(), other))
    assert torch.equal(out_lists, out_other)
    assert not torch.all(out_lists == out_lists[0])


def test_stacked_with_last_offset_stacks_b_plus_one_offsets() -> None:
    config = cfg(**TWO, input_layout="stacked", include_last_offset=True)
    flat = _same_bags(config).flat()
    assert flat[1].tolist() == [[0, 2, 4, 6, 8]] * 2
    lists = cfg(**TWO)
    assert torch.equal(build(config, 1)(*to_torch(flat, config)),
                       build(lists, 1)(*to_torch(_same_bags(lists).flat(), lists)))


def test_stacked_hand_computed() -> None:
    model = build(cfg(ln_emb=(4, 4), ln_top=(5, 1), input_layout="stacked"), 0)
    assign(model.emb_l[0].bag.weight, ROWS)
    assign(model.emb_l[1].bag.weight, [[-r[0], -r[1]] for r in ROWS])
    ly = model.apply_emb(idx([[0, 1], [0, 0]]), idx([[1, 3], [0, 2]]))
    assert_rows(ly[0], [[10.0, 20.0], [1000.0, 2000.0]])
    assert_rows(ly[1], [[0.0, 0.0], [-101.0, -202.0]])  # [] | [0, 2]


def test_fixed_hand_computed() -> None:
    model = table_model(input_layout="fixed", pooling="mean")
    (pooled,) = model.apply_emb(None, [idx([[1, 3], [0, 2]])])
    assert_rows(pooled, [[505.0, 1010.0], [50.5, 101.0]])


@pytest.mark.parametrize("layout, bags, message", [
    ("stacked", ([0, 1], [0, 1, 2]), "same count in every table"),
    ("fixed", ([0, 1], [0, 1]), None),
    ("fixed", ([0, 1, 1], [0, 1, 1]), "equally long"),
])
def test_layout_constraints_on_batches(layout: str, bags: tuple[list[int], list[int]],
                                       message: str | None) -> None:
    config = cfg(ln_emb=(4, 4), ln_top=(5, 1), input_layout=layout)
    starts = (np.array([0, 1]), np.array([0, 1]))
    batch = Batch.for_config(config, np.zeros((2, 1), np.float32), starts,
                             tuple(np.array(b) for b in bags))
    if message is None:
        batch.validate(config)
    else:
        with pytest.raises(InvalidSample, match=message):
            batch.validate(config)


def test_npz_round_trip_keeps_weights_and_layout() -> None:
    import io

    config = cfg(**TWO, input_layout="stacked", include_last_offset=True, per_sample_weights=True)
    sample = Sample(config, 3, (_same_bags(config),))
    with np.load(io.BytesIO(sample.npz_bytes()), allow_pickle=False) as arrays:
        back = Sample.from_arrays(config, 3, arrays)
    for x, y in zip(sample.batches[0].flat(), back.batches[0].flat()):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert back.batches[0].weights is not None


# ----------------------------------------------------------------- dtypes --
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_model_holds_the_float32_weights_rounded(dtype: str) -> None:
    half, full = build(cfg(dtype=dtype), 5), build(cfg(), 5)
    want = getattr(torch, dtype)
    for (name, p), (_, q) in zip(half.state_dict().items(), full.state_dict().items()):
        assert p.dtype == want and torch.equal(p, q.to(want)), name
    ref = build_reference(cfg(dtype=dtype), 5)
    for (name, p), (_, q) in zip(ref.state_dict().items(), half.state_dict().items()):
        assert p.dtype == torch.float64 and torch.equal(p, q.double()), name


def test_bfloat16_sum_rounds_where_the_reference_does_not() -> None:
    # 1 + 2**-9 is not a bfloat16 (8 significant bits): the model's bag sum
    # rounds it to 1, the float64 reference of the same rows keeps it.
    config = cfg(dtype="bfloat16")
    model, ref = build(config, 0), build_reference(config, 0)
    for m in (model, ref):
        assign(m.emb_l[0].bag.weight, [[1.0, 0.5], [2.0 ** -9, 0.25], [0.0, 0.0], [0.0, 0.0]])
    (got,) = model.apply_emb([idx([0])], [idx([0, 1])])
    (want,) = ref.apply_emb([idx([0])], [idx([0, 1])])
    assert got.dtype == torch.bfloat16 and got.tolist() == [[1.0, 0.75]]
    assert want.tolist() == [[1.001953125, 0.75]]


@pytest.mark.parametrize("dtype, rounded", [("float16", 0.333251953125),
                                            ("bfloat16", 0.333984375), ("float32", None)])
def test_reference_rounds_dense_inputs_to_the_dtype(dtype: str, rounded: float | None) -> None:
    config = cfg(dtype=dtype)
    ref = build_reference(config, 0)
    third = torch.tensor([[1.0 / 3.0]], dtype=torch.float64)
    seen = ref._input(third)
    assert seen.dtype == torch.float64
    assert seen.item() == (rounded if rounded is not None else float(np.float32(1.0 / 3.0)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_model_takes_and_returns_float32(dtype: str) -> None:
    config = cfg(**TWO, dtype=dtype)
    batch = _same_bags(config)
    out = build(config, 2)(*to_torch(batch.flat(), config))
    ref = build_reference(config, 2)(*to_torch(batch.flat(), config, torch.float64))
    assert out.dtype == torch.float32 and ref.dtype == torch.float64
    u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    assert float((out.double() - ref).abs().max().detach()) < 64 * u


# ------------------------------------------------------- quantized MLP ----
@pytest.mark.parametrize("kind", ["qint8", "float16"])
def test_quantized_mlp_reference_holds_the_dequantized_weights(kind: str) -> None:
    config = cfg(**TWO, quantize_mlp=kind)
    model, ref, plain = build(config, 6), build_reference(config, 6), build(cfg(**TWO), 6)
    first = model.bot_l[0].weight()
    want = first.dequantize() if kind == "qint8" else first
    assert torch.equal(ref.bot_l[0].weight, want.double())
    assert not torch.equal(ref.bot_l[0].weight, plain.bot_l[0].weight.double())
    if kind == "float16":
        assert torch.equal(want, plain.bot_l[0].weight.half().float())
    batch = _same_bags(config)
    out = model(*to_torch(batch.flat(), config))
    expected = ref(*to_torch(batch.flat(), config, torch.float64))
    # qint8 also quantizes activations (per batch, 8 bits): a few percent.
    torch.testing.assert_close(out.double(), expected, atol=0.05 if kind == "qint8" else 1e-5,
                               rtol=0.05 if kind == "qint8" else 1e-4)


# ------------------------------------------------------- QR at 2**24 ------
def test_qr_quotient_is_upstreams_float32_division() -> None:
    # 2**24 + 3 rounds to 2**24 + 4 in float32 (ties to even): upstream's
    # quotient by 4 is then 4194305, one more than exact floor division.
    index = 2**24 + 3
    assert qr_quotient(np.array([index]), 4).tolist() == [4194305] != [index // 4]
    table = QRTable(2**24 + 8, 1, 4, "add", np.random.RandomState(0))
    with torch.no_grad():
        table.weight_q.copy_(torch.arange(table.weight_q.shape[0], dtype=torch.float32)[:, None])
        table.weight_r.zero_()
    pooled = table(idx([index, 2**24 + 1, 7]), idx([0, 1, 2]), None)
    assert pooled[:, 0].tolist() == [4194305.0, 4194304.0, 1.0]


def test_index_whose_float32_quotient_leaves_the_table_is_invalid() -> None:
    rows = 2**24 + 4  # collisions 1: quotient rows = rows; 2**24 + 3 rounds to 2**24 + 4
    config = cfg(ln_emb=(rows,), qr_flag=True, qr_threshold=8, qr_collisions=1)
    assert top_index(config, 0) == 2**24 + 2
    bad = Batch(np.zeros((1, 1), np.float32), (np.array([0]),), (np.array([2**24 + 3]),))
    with pytest.raises(InvalidSample, match="float32 quotient"):
        bad.validate(config)
    Batch(np.zeros((1, 1), np.float32), (np.array([0]),), (np.array([2**24 + 2]),)).validate(config)


# ------------------------------------------------ rounding magnitude M ----
def test_table_magnitude_pools_absolute_rows() -> None:
    from fuzz.model.rounding import _table_magnitude

    for mode, expected in [("sum", [[0.0, 0.0], [1010.0, 2020.0], [201.0, 402.0]]),
                           ("mean", [[0.0, 0.0], [505.0, 1010.0], [67.0, 134.0]]),
                           ("max", [[0.0, 0.0], [1000.0, 2000.0], [100.0, 200.0]])]:
        model = build_reference(cfg(pooling=mode), 0)
        assign(model.emb_l[0].bag.weight, [[-r[0], r[1]] for r in ROWS])
        got = _table_magnitude(model.emb_l[0], idx(INDICES), idx(OFFSETS), None)
        assert_rows(got, expected)


def test_mlp_magnitude_uses_absolute_weights_and_bounds_sigmoid() -> None:
    from torch import nn

    from fuzz.model.rounding import _mlp_magnitude

    linear = nn.Linear(2, 1).double()
    assign(linear.weight, [[1.0, -2.0]])
    assign(linear.bias, [-3.0])
    got = _mlp_magnitude(nn.Sequential(linear, nn.Sigmoid()), torch.tensor([[4.0, 5.0]],
                                                                            dtype=torch.float64))
    assert got.tolist() == [[(4.0 + 10.0 + 3.0) / 4 + 1]]


def test_rounding_spread_follows_the_dtype_and_marks_overflow() -> None:
    from fuzz.model.rounding import rounding_spread

    spreads = {}
    for dtype in ("float32", "float16", "bfloat16"):
        config = cfg(**TWO, dtype=dtype)
        ref = build_reference(config, 4)
        args = to_torch(_same_bags(config).flat(), config, torch.float64)
        spreads[dtype] = rounding_spread(ref, *args)
        assert torch.all(spreads[dtype] > 0) and torch.all(torch.isfinite(spreads[dtype]))
        assert torch.equal(spreads[dtype], rounding_spread(ref, *args))  # seeded
    assert float(spreads["float32"].max()) < 1e-5
    assert spreads["float32"].max() < spreads["float16"].max() < spreads["bfloat16"].max()
    config = cfg(**TWO, dtype="float16")
    big = _same_bags(config)
    huge = Batch.for_config(config, big.dense * 3e4, big.offsets, big.indices, big.weights)
    ref = build_reference(config, 4)
    assert torch.all(torch.isinf(rounding_spread(ref, *to_torch(huge.flat(), config,
                                                                torch.float64))))


@pytest.mark.parametrize("overrides", [
    dict(), dict(pooling="max", input_layout="fixed"), dict(per_sample_weights=True),
    dict(weighted_pooling="learned", arch_interaction_op="cat", ln_top=(6, 3, 1)),
    dict(qr_flag=True, qr_threshold=5, qr_operation="mult", input_layout="stacked"),
    dict(m_spa=(1, 2), md_flag=True, md_threshold=5, dtype="float16"),
    dict(quantize_mlp="qint8", sigmoid_bot=0),
], ids=["plain", "max-fixed", "weights", "learned-cat", "qr-stacked", "md-half", "qint8"])
def test_magnitude_bounds_the_reference_output(overrides: dict[str, Any]) -> None:
    from fuzz.model.rounding import output_magnitude

    config = cfg(**{**TWO, **overrides})
    batch = _same_bags(config)
    ref = build_reference(config, 4)
    args = to_torch(batch.flat(), config, torch.float64)
    with torch.no_grad():
        out = ref(*args)
    magnitude = output_magnitude(ref, *args)
    assert magnitude.shape == out.shape and magnitude.dtype == torch.float64
    assert torch.all(magnitude >= out.abs() * (1 - 1e-12))
