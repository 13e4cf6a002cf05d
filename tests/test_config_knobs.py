"""The config knobs beyond ``DLRM_Net``'s constructor: defaults are today's
model, JSON round-trips them, old JSON without them loads with the defaults,
and every combination torch or upstream cannot run is one ``name=value``
line that says what to do."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fuzz.model.config import DLRMConfig, InvalidConfig


def make(**overrides: Any) -> DLRMConfig:
    fields: dict[str, Any] = dict(m_spa=4, ln_emb=(10, 20, 30), ln_bot=(3, 4), ln_top=(10, 1))
    fields.update(overrides)
    return DLRMConfig(**fields)


def test_defaults_are_todays_model() -> None:
    config = make()
    assert (config.dtype, config.quantize_mlp, config.pooling, config.include_last_offset,
            config.padding_idx, config.per_sample_weights, config.input_layout) == \
        ("float32", "none", "sum", False, None, False, "lists")
    assert config.upstream and config.schema == 1


def test_old_json_without_the_new_fields_loads_with_defaults() -> None:
    old = ('{"arch_interaction_itself": false, "arch_interaction_op": "dot", "index_dtype": '
           '"int32", "ln_bot": [3, 4], "ln_emb": [10, 20, 30], "ln_top": [10, 1], '
           '"loss_threshold": 0.0, "m_spa": 4, "md_flag": false, "md_threshold": 200, '
           '"qr_collisions": 4, "qr_flag": false, "qr_operation": "mult", "qr_threshold": 200, '
           '"quantize_bits": 32, "schema": 1, "sigmoid_bot": -1, "sigmoid_top": -1, '
           '"weighted_pooling": null}')
    assert DLRMConfig.from_json(old) == make(index_dtype="int32")


@pytest.mark.parametrize("overrides", [
    dict(dtype="float16", pooling="mean", padding_idx=3),
    dict(dtype="bfloat16", include_last_offset=True, per_sample_weights=True,
         input_layout="stacked"),
    dict(quantize_mlp="qint8", input_layout="fixed", quantize_bits=8),
    dict(quantize_mlp="float16", pooling="max", qr_flag=True, qr_threshold=15),
], ids=["half-mean-padding", "bf16-last-weights-stacked", "qint8-fixed-q8", "fp16mlp-max-qr"])
def test_json_round_trip_of_the_new_knobs(overrides: dict[str, Any]) -> None:
    config = make(**overrides)
    text = config.to_json()
    assert all(json.loads(text)[name] == value for name, value in overrides.items())
    back = DLRMConfig.from_json(text)
    assert back == config and back.to_json() == text


@pytest.mark.parametrize("overrides, pattern", [
    (dict(dtype="float64"), r"^dtype='float64': must be one of \['float32', 'float16', 'bfloat16'\]$"),
    (dict(quantize_mlp=8), r"^quantize_mlp=8: must be one of \['none', 'qint8', 'float16'\]$"),
    (dict(pooling="avg"), r"^pooling='avg': must be one of \['sum', 'mean', 'max'\]$"),
    (dict(input_layout="csr"), r"^input_layout='csr': must be one of \['lists', 'stacked', 'fixed'\]$"),
    (dict(include_last_offset=1), r"^include_last_offset=1: must be true or false$"),
    (dict(per_sample_weights="yes"), r"^per_sample_weights='yes': must be true or false$"),
    (dict(padding_idx=1.0), r"^padding_idx=1\.0: must be null or an integer"),
    (dict(padding_idx=True), r"^padding_idx=True: must be null or an integer"),
    (dict(padding_idx=10), r"^padding_idx=10: must be a row of every table: 0\.\.9 "),
    (dict(padding_idx=-1), r"^padding_idx=-1: must be a row of every table"),
    (dict(per_sample_weights=True, pooling="mean"),
     r"^per_sample_weights=True: torch's embedding_bag takes per-sample weights only with "
     r"pooling='sum' \(got pooling='mean'\): set pooling='sum' or per_sample_weights=False$"),
    (dict(weighted_pooling="fixed", pooling="max"),
     r"^weighted_pooling='fixed': pooling weights are per-sample weights.*only with pooling='sum'"),
    (dict(per_sample_weights=True, weighted_pooling="learned"),
     r"^per_sample_weights=True: weighted_pooling='learned' already supplies the per-sample "
     r"weights: set weighted_pooling=None or per_sample_weights=False$"),
    (dict(pooling="mean", md_flag=True), r"^pooling='mean': mean/max pooling is for plain and QR "
     r"tables only.*set md_flag=False and quantize_bits=32, or pooling='sum'$"),
    (dict(pooling="max", quantize_bits=8), r"^pooling='max': mean/max pooling is for plain"),
    (dict(padding_idx=0, qr_flag=True, qr_threshold=15),
     r"^padding_idx=0: only plain nn.EmbeddingBag tables have a padding row, but table 1 is "
     r"'qr': drop padding_idx or make every table plain"),
    (dict(padding_idx=0, quantize_bits=4), r"^padding_idx=0: .*table 0 is 'quantized'"),
    (dict(dtype="float16", quantize_bits=8),
     r"^dtype='float16': quantized tables dequantize to float32: use dtype='float32'"),
    (dict(dtype="bfloat16", quantize_mlp="qint8"),
     r"^quantize_mlp='qint8': dynamic quantization converts float32 nn.Linear layers, but "
     r"dtype='bfloat16': use dtype='float32'$"),
    (dict(input_layout="fixed", include_last_offset=True),
     r"^include_last_offset=True: input_layout='fixed' has no offsets"),
    (dict(input_layout="fixed", weighted_pooling="fixed"),
     r"^weighted_pooling='fixed': upstream gathers pooling weights with v_W.gather\(0, indices\), "
     r"which needs 1-D indices: use input_layout 'lists' or 'stacked'$"),
])
def test_invalid_combinations_are_one_line_with_the_fix(overrides: dict[str, Any],
                                                        pattern: str) -> None:
    with pytest.raises(InvalidConfig, match=pattern) as info:
        make(**overrides)
    assert "\n" not in str(info.value)
    assert re.match(r"^\w+=\S+: ", str(info.value))


@pytest.mark.parametrize("overrides", [
    dict(pooling="mean", qr_flag=True, qr_threshold=15),     # QREmbeddingBag takes a mode
    dict(per_sample_weights=True, quantize_bits=8, include_last_offset=True),
    dict(padding_idx=9, pooling="max", dtype="bfloat16", input_layout="fixed"),
    dict(quantize_mlp="qint8", md_flag=True, md_threshold=15),  # quantizes the projections too
    dict(input_layout="stacked", weighted_pooling="learned", include_last_offset=True),
])
def test_combinations_that_run_are_accepted(overrides: dict[str, Any]) -> None:
    make(**overrides)


@pytest.mark.parametrize("overrides, upstream", [
    (dict(), True), (dict(quantize_mlp="qint8"), True), (dict(input_layout="stacked"), True),
    (dict(input_layout="fixed"), True), (dict(pooling="mean"), False),
    (dict(include_last_offset=True), False), (dict(padding_idx=0), False),
    (dict(per_sample_weights=True), False), (dict(dtype="float16"), False),
])
def test_upstream_says_which_configs_are_extensions(overrides: dict[str, Any],
                                                    upstream: bool) -> None:
    assert make(**overrides).upstream is upstream
