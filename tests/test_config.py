"""Validation and JSON round trip of ``fuzz.model.config.DLRMConfig``.

Each invalid field must raise ``InvalidConfig`` (a ``ValueError``) whose message
names the offending ``field=value`` and says what it must be: a bottom MLP that
does not end at the embedding width (including QR concat's doubled width), a
top MLP that does not start at the interaction width (dot, dot with
self-interaction, cat), sigmoid layer indices out of range, loss_threshold
outside [0, 0.5], unknown interaction op / weighted pooling / quantize bits /
index dtype, quantization combined with QR or MD, 4-bit tables of odd width,
per-table ``m_spa`` lists without ``md_flag`` or of the wrong length, QR concat
with a table not above ``qr_threshold``, ``qr_collisions < 1``, an empty
``ln_emb``. The derived widths and table kinds are checked on valid configs,
and ``to_json``/``from_json`` must round-trip (tuples preserved) while malformed
JSON, non-object JSON, unknown keys and missing required fields raise
``InvalidConfig`` naming the problem.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from fuzz.model.config import DLRMConfig, InvalidConfig, embedding_width, interaction_width
from tests.helpers import tiny_config


# Three tables of width 4, dot interaction: 4 features, ln_top starts at 4 + 4*3/2 = 10.
make = tiny_config


def raises(pattern: str, **overrides: Any) -> InvalidConfig:
    with pytest.raises(InvalidConfig, match=pattern) as info:
        make(**overrides)
    return info.value


def esc(text: str) -> str:
    return re.escape(text)


# ------------------------------------------------------------- valid ones --
def test_valid_config_derived_widths() -> None:
    config = make()
    assert config.embedding_width == 4
    assert config.interaction_width == 10
    assert config.num_dense == 3 and config.num_tables == 3 and config.base_width == 4
    assert [config.table_kind(k) for k in range(3)] == ["plain", "plain", "plain"]
    assert config.ln_emb == (10, 20, 30) and isinstance(config.ln_emb, tuple)


def test_lists_are_stored_as_tuples() -> None:
    config = make(ln_emb=[10, 20, 30], ln_bot=[3, 4], ln_top=[10, 1])
    assert config.ln_emb == (10, 20, 30) and config.ln_bot == (3, 4) and config.ln_top == (10, 1)
    assert all(isinstance(v, tuple) for v in (config.ln_emb, config.ln_bot, config.ln_top))
    md = make(m_spa=[2, 4, 4], md_flag=True)
    assert md.m_spa == (2, 4, 4) and isinstance(md.m_spa, tuple)
    hash(md)  # frozen and hashable


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        make().m_spa = 8  # type: ignore[misc]


@pytest.mark.parametrize("op, itself, expected", [
    ("dot", False, 4 + 6), ("dot", True, 4 + 10), ("cat", False, 16), ("cat", True, 16),
])
def test_interaction_width_function(op: str, itself: bool, expected: int) -> None:
    assert interaction_width(4, 3, op, itself) == expected
    assert make(arch_interaction_op=op, arch_interaction_itself=itself,
                ln_top=(expected, 1)).interaction_width == expected


def test_embedding_width_function() -> None:
    assert embedding_width(4, False) == 4
    assert embedding_width(4, True) == 8
    assert embedding_width((2, 6, 3), False) == 6
    assert embedding_width((2, 6, 3), True) == 12


def test_table_kinds_and_widths() -> None:
    config = make(ln_emb=(5, 50, 500), m_spa=(2, 3, 4), md_flag=True, md_threshold=20,
                  qr_flag=True, qr_threshold=100)
    # QR is checked before MD, as in DLRM
    assert [config.table_kind(k) for k in range(3)] == ["plain", "md", "qr"]
    assert [config.table_width(k) for k in range(3)] == [4, 3, 4]
    quant = make(quantize_bits=8)
    assert [quant.table_kind(k) for k in range(3)] == ["quantized"] * 3
    # rows == threshold is not above the threshold
    assert make(ln_emb=(20, 21, 5), md_flag=True, md_threshold=20).table_kind(0) == "plain"
    assert make(ln_emb=(20, 21, 5), md_flag=True, md_threshold=20).table_kind(1) == "md"


def test_qr_concat_doubles_the_embedding_width() -> None:
    config = make(qr_flag=True, qr_operation="concat", qr_threshold=5,
                  ln_bot=(3, 8), ln_top=(8 + 6, 1))
    assert config.qr_concat and config.embedding_width == 8 and config.interaction_width == 14


def test_invalid_config_is_a_value_error() -> None:
    assert issubclass(InvalidConfig, ValueError)


# --------------------------------------------------------------- widths ---
def test_ln_bot_must_end_at_embedding_width() -> None:
    err = raises(r"^ln_bot=\[3, 5\]: must end at the embedding width 4\b", ln_bot=(3, 5))
    assert "x2 for QR concat" not in str(err)


def test_ln_bot_must_end_at_doubled_width_for_qr_concat() -> None:
    raises(r"^ln_bot=\[3, 4\]: must end at the embedding width 8 .*x2 for QR concat",
           qr_flag=True, qr_operation="concat", qr_threshold=5, ln_bot=(3, 4), ln_top=(14, 1))


def test_ln_bot_must_end_at_max_width_with_md() -> None:
    raises(r"^ln_bot=\[3, 2\]: must end at the embedding width 6\b",
           m_spa=(2, 6, 3), md_flag=True, ln_bot=(3, 2))


@pytest.mark.parametrize("op, itself, expected", [
    ("dot", False, 10), ("dot", True, 14), ("cat", False, 16),
])
def test_ln_top_must_start_at_interaction_width(op: str, itself: bool, expected: int) -> None:
    raises(rf"^ln_top=\[11, 1\]: must start at {expected}, the width the '{op}' interaction",
           arch_interaction_op=op, arch_interaction_itself=itself, ln_top=(11, 1))


def test_ln_top_width_counts_every_table() -> None:
    raises(r"^ln_top=\[10, 1\]: must start at 14\b", ln_emb=(10, 20, 30, 40))
    assert make(ln_emb=(10, 20, 30, 40), ln_top=(14, 1)).interaction_width == 14


# --------------------------------------------------------------- choices ---
@pytest.mark.parametrize("name, value", [
    ("sigmoid_bot", 1), ("sigmoid_bot", -2), ("sigmoid_top", 1), ("sigmoid_top", -5),
])
def test_sigmoid_layer_out_of_range(name: str, value: int) -> None:
    raises(rf"^{name}={value}: must be -1 \(no sigmoid\) or a layer index 0\.\.0$",
           **{name: value})


def test_sigmoid_range_follows_mlp_depth() -> None:
    raises(r"^sigmoid_top=3: .*layer index 0\.\.2$", ln_top=(10, 5, 3, 1), sigmoid_top=3)
    config = make(ln_top=(10, 5, 3, 1), sigmoid_top=2, ln_bot=(3, 7, 4), sigmoid_bot=1)
    assert config.sigmoid_top == 2 and config.sigmoid_bot == 1


def test_sigmoid_must_be_an_integer() -> None:
    raises(r"^sigmoid_bot=True: must be an integer", sigmoid_bot=True)
    raises(r"^sigmoid_top=0\.0: must be an integer", sigmoid_top=0.0)


@pytest.mark.parametrize("value, shown", [
    (0.6, "0.6"), (-0.1, "-0.1"), (float("nan"), "nan"), (float("inf"), "inf"), ("0.1", "'0.1'"),
])
def test_loss_threshold_out_of_range(value: Any, shown: str) -> None:
    raises(rf"^loss_threshold={esc(shown)}: must be in \[0, 0\.5\]", loss_threshold=value)


@pytest.mark.parametrize("value", [0.0, 0.5, 0.25, 0])
def test_loss_threshold_bounds_accepted(value: float) -> None:
    assert make(loss_threshold=value).loss_threshold == value


def test_unknown_interaction_op() -> None:
    raises(r"^arch_interaction_op='sum': must be one of \['dot', 'cat'\]",
           arch_interaction_op="sum")


def test_bad_weighted_pooling() -> None:
    raises(r"^weighted_pooling='ones': must be one of \[None, 'fixed', 'learned'\]",
           weighted_pooling="ones")


@pytest.mark.parametrize("value, shown", [(16, "16"), ("8", "'8'"), (0, "0")])
def test_bad_quantize_bits(value: Any, shown: str) -> None:
    raises(rf"^quantize_bits={shown}: must be one of \[32, 8, 4\]", quantize_bits=value)


def test_bad_qr_operation() -> None:
    raises(r"^qr_operation='sub': must be one of \['mult', 'add', 'concat'\]", qr_operation="sub")


@pytest.mark.parametrize("value", ["int16", "long", None])
def test_bad_index_dtype(value: Any) -> None:
    raises(rf"^index_dtype={esc(repr(value))}: must be one of \['int64', 'int32'\]",
           index_dtype=value)


@pytest.mark.parametrize("name", ["arch_interaction_itself", "qr_flag", "md_flag"])
def test_flags_must_be_bool(name: str) -> None:
    raises(rf"^{name}=1: must be true or false", **{name: 1})


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("flag", ["qr_flag", "md_flag"])
def test_quantize_with_qr_or_md_rejected(bits: int, flag: str) -> None:
    raises(rf"^quantize_bits={bits}: quantized tables are plain tables: set qr_flag and md_flag",
           quantize_bits=bits, **{flag: True})


def test_4bit_needs_even_width() -> None:
    raises(r"^quantize_bits=4: 4-bit tables need an even width, got 3",
           m_spa=3, ln_bot=(3, 3), ln_top=(9, 1), quantize_bits=4)
    # the same odd width is fine for 8-bit
    assert make(m_spa=3, ln_bot=(3, 3), ln_top=(9, 1), quantize_bits=8).quantize_bits == 8


def test_m_spa_list_needs_md_flag() -> None:
    raises(r"^m_spa=\[2, 4, 4\]: a per-table list needs md_flag=True", m_spa=(2, 4, 4))


@pytest.mark.parametrize("widths", [(2, 4), (2, 4, 4, 4)])
def test_m_spa_list_needs_one_width_per_table(widths: tuple[int, ...]) -> None:
    raises(rf"^m_spa={esc(str(list(widths)))}: needs one width per table \(3, as ln_emb\)",
           m_spa=widths, md_flag=True)


@pytest.mark.parametrize("value", [0, -4])
def test_m_spa_must_be_positive(value: int) -> None:
    raises(rf"^m_spa={value}: must be >= 1", m_spa=value)


def test_m_spa_list_entries_must_be_positive() -> None:
    raises(r"^m_spa=\[2, 0, 4\]: every entry must be >= 1", m_spa=(2, 0, 4), md_flag=True)


def test_qr_concat_needs_every_table_above_threshold() -> None:
    raises(r"^qr_threshold=15: with qr_operation='concat' every table must be a QR table "
           r"\(rows > qr_threshold\), but tables of \[10, 15\] rows are not: "
           r"lower qr_threshold below 10",
           ln_emb=(10, 15, 30), qr_flag=True, qr_operation="concat", qr_threshold=15,
           ln_bot=(3, 8), ln_top=(14, 1))


def test_qr_concat_constraint_ignored_without_qr_flag() -> None:
    assert make(qr_operation="concat", qr_threshold=15).qr_concat is False


@pytest.mark.parametrize("value", [0, -1])
def test_qr_collisions_at_least_one(value: int) -> None:
    raises(rf"^qr_collisions={value}: must be an integer >= 1", qr_flag=True,
           qr_collisions=value)


@pytest.mark.parametrize("value", [2.5, True, "many"])
def test_qr_collisions_must_be_int_even_without_qr(value: object) -> None:
    raises(r"^qr_collisions=.*: must be an integer >= 1", qr_collisions=value)


def test_schema_and_bool_threshold_and_float_width_are_rejected() -> None:
    raises(r"^schema='x': this dlrm-fuzz reads config schema 1 only", schema="x")
    raises(r"^loss_threshold=False: must be in \[0, 0.5\]", loss_threshold=False)
    raises(r"^m_spa=4.0: must be an integer, or with md_flag a list", m_spa=4.0)


def test_numpy_integers_are_accepted() -> None:
    import numpy as np

    config = make(ln_emb=np.array([10, 20, 30]), m_spa=np.int64(4))
    assert config.ln_emb == (10, 20, 30) and type(config.ln_emb[0]) is int
    assert type(config.m_spa) is int


@pytest.mark.parametrize("name", ["qr_threshold", "md_threshold"])
def test_thresholds_must_be_int(name: str) -> None:
    raises(rf"^{name}='200': must be an integer", **{name: "200"})


# ---------------------------------------------------------- layer lists ---
def test_empty_ln_emb() -> None:
    raises(r"^ln_emb=\[\]: must have at least 1 entries", ln_emb=())


@pytest.mark.parametrize("name, value, pattern", [
    ("ln_emb", (10, 0, 30), r"^ln_emb=\[10, 0, 30\]: every entry must be >= 1"),
    ("ln_emb", (10, 2.5, 30), r"^ln_emb=\[10, 2\.5, 30\]: must contain only integers"),
    ("ln_emb", (10, True, 30), r"^ln_emb=\[10, True, 30\]: must contain only integers"),
    ("ln_emb", "abc", r"^ln_emb='abc': must be a list of at least 1 integers"),
    ("ln_emb", 10, r"^ln_emb=10: must be a list"),
    ("ln_bot", (4,), r"^ln_bot=\[4\]: must have at least 2 entries"),
    ("ln_top", (10,), r"^ln_top=\[10\]: must have at least 2 entries"),
    ("ln_top", (10, 0), r"^ln_top=\[10, 0\]: every entry must be >= 1"),
])
def test_bad_layer_lists(name: str, value: Any, pattern: str) -> None:
    raises(pattern, **{name: value})


# ------------------------------------------------------------------ JSON ---
ROUND_TRIP = [
    dict(),
    dict(m_spa=(2, 4, 4), md_flag=True, md_threshold=15, weighted_pooling="learned",
         sigmoid_top=0, loss_threshold=0.25, index_dtype="int32"),
    dict(qr_flag=True, qr_operation="concat", qr_threshold=5, qr_collisions=3,
         ln_bot=(3, 6, 8), ln_top=(8 + 10, 4, 1), arch_interaction_itself=True, sigmoid_bot=1),
    dict(quantize_bits=4, arch_interaction_op="cat", ln_top=(16, 1), weighted_pooling="fixed"),
]


@pytest.mark.parametrize("overrides", ROUND_TRIP, ids=["default", "md", "qr-concat", "q4-cat"])
def test_json_round_trip(overrides: dict[str, Any]) -> None:
    config = make(**overrides)
    text = config.to_json()
    data = json.loads(text)
    assert isinstance(data["ln_emb"], list)
    assert list(data) == sorted(data)  # sort_keys: stable text
    back = DLRMConfig.from_json(text)
    assert back == config
    assert back.to_json() == text
    for name in ("ln_emb", "ln_bot", "ln_top"):
        assert isinstance(getattr(back, name), tuple)
    assert type(back.m_spa) is type(config.m_spa)
    assert hash(back) == hash(config)


def test_json_keeps_every_field() -> None:
    data = json.loads(make(weighted_pooling="fixed", loss_threshold=0.1).to_json())
    assert set(data) == {f.name for f in dataclasses.fields(DLRMConfig)}
    assert data["weighted_pooling"] == "fixed" and data["loss_threshold"] == 0.1
    assert data["m_spa"] == 4 and data["schema"] == 1
    as_dict = make(m_spa=(2, 4, 4), md_flag=True).to_dict()
    assert all(type(as_dict[name]) is list for name in ("m_spa", "ln_emb", "ln_bot", "ln_top"))
    assert as_dict["ln_emb"] == [10, 20, 30] and as_dict["m_spa"] == [2, 4, 4]


def test_from_json_fills_defaults() -> None:
    config = DLRMConfig.from_json('{"m_spa": 4, "ln_emb": [10, 20, 30], "ln_bot": [3, 4], '
                                  '"ln_top": [10, 1]}')
    assert config == make()
    assert config.arch_interaction_op == "dot" and config.quantize_bits == 32


@pytest.mark.parametrize("text", ['{"m_spa": 4,', "not json", ""])
def test_from_json_malformed(text: str) -> None:
    with pytest.raises(InvalidConfig, match=r"^config JSON is malformed: "):
        DLRMConfig.from_json(text)


@pytest.mark.parametrize("text, kind", [("[1, 2]", "list"), ("4", "int"), ("null", "NoneType")])
def test_from_json_not_an_object(text: str, kind: str) -> None:
    with pytest.raises(InvalidConfig, match=rf"^config={kind}: must be a JSON object"):
        DLRMConfig.from_json(text)


def test_from_json_unknown_key_named() -> None:
    data = json.loads(make().to_json())
    data["bogus_field"] = 7
    with pytest.raises(InvalidConfig, match=r"^bogus_field=7: unknown DLRM config field"):
        DLRMConfig.from_json(json.dumps(data))


def test_from_json_missing_required_field() -> None:
    data = json.loads(make().to_json())
    del data["ln_top"]
    with pytest.raises(InvalidConfig, match=r"^ln_top=<missing>: required DLRM config field"):
        DLRMConfig.from_json(json.dumps(data))


def test_from_json_invalid_value_still_validated() -> None:
    data = json.loads(make().to_json())
    data["ln_top"] = [11, 1]
    with pytest.raises(InvalidConfig, match=r"^ln_top=\[11, 1\]: must start at 10"):
        DLRMConfig.from_json(json.dumps(data))
