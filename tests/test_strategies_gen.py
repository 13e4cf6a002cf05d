"""The generation of the new knobs and shape classes: every knob value and
every shape class is reachable, tiny is preferred, every sample is valid in
its layout, and shrinking lands on the default of every new knob."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from fuzz.model.config import DLRMConfig
from fuzz.model.sample import Sample
from strategies import SHAPE_CLASSES, dlrm_configs, samples, shape_classes

KNOB_VALUES = [("dtype", "float16"), ("dtype", "bfloat16"), ("quantize_mlp", "qint8"),
               ("quantize_mlp", "float16"), ("pooling", "mean"), ("pooling", "max"),
               ("include_last_offset", True), ("per_sample_weights", True),
               ("input_layout", "stacked"), ("input_layout", "fixed"), ("weights", "inputs")]
NEW_DEFAULTS = {"dtype": "float32", "quantize_mlp": "none", "pooling": "sum",
                "include_last_offset": False, "padding_idx": None, "per_sample_weights": False,
                "input_layout": "lists"}


@pytest.mark.slow  # a Hypothesis search of up to 2000 samples per value
@pytest.mark.parametrize("name, value", KNOB_VALUES, ids=[f"{n}={v}" for n, v in KNOB_VALUES])
def test_every_knob_value_is_reachable(name: str, value: Any) -> None:
    found = find(dlrm_configs(), lambda c: getattr(c, name) == value,
                 settings=settings(max_examples=2000, database=None))
    assert getattr(found, name) == value
    # shrunk: everything else at its plainest
    assert found.ln_emb == (1,) or name == "padding_idx"
    assert {k: getattr(found, k) for k in NEW_DEFAULTS if k != name} == \
        {k: v for k, v in NEW_DEFAULTS.items() if k != name}


def test_padding_row_is_reachable_and_shrinks_to_row_zero() -> None:
    found = find(dlrm_configs(), lambda c: c.padding_idx is not None,
                 settings=settings(max_examples=2000, database=None))
    assert found.padding_idx == 0 and found.ln_emb == (1,)


def test_config_shrinks_to_every_new_default() -> None:
    c = find(dlrm_configs(), lambda c: True, settings=settings(database=None))
    assert {k: getattr(c, k) for k in NEW_DEFAULTS} == NEW_DEFAULTS


CLASSES: dict[str, Callable[[Sample], bool]] = {
    "tiny": lambda s: max(s.config.ln_emb) <= 64 and s.batches[0].batch_size <= 8,
    "medium: 10^3+ rows, 5+ tables, width 16+, bag 7+, batch 9+": lambda s: (
        max(s.config.ln_emb) > 1000 and s.config.num_tables > 4 and s.config.base_width > 16
        and s.batches[0].batch_size > 8
        and max(int(b.bag_lengths(k).max()) for b in s.batches
                for k in range(s.config.num_tables)) > 6),
    "large: an index at or past 2^24 of a QR table": lambda s: any(
        s.config.table_kind(k) == "qr" and int(b.indices[k].max(initial=0)) >= 2**24
        for b in s.batches for k in range(s.config.num_tables)),
    "large dense magnitudes": lambda s: float(np.abs(s.batches[0].dense).max()) > 100,
}


@pytest.mark.slow  # a Hypothesis search of up to 3000 samples per class
@pytest.mark.parametrize("name", list(CLASSES))
def test_every_shape_class_is_reachable(name: str) -> None:
    found = find(samples(), CLASSES[name], settings=settings(
        max_examples=3000, database=None, suppress_health_check=list(HealthCheck)))
    assert CLASSES[name](found)


def test_tiny_is_preferred() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=300, database=None)
    @given(shape_classes())
    def draw(name: str) -> None:
        seen[name] += 1

    draw()
    assert seen["tiny"] > seen["medium"] > seen["large"] > 0
    assert seen["tiny"] > 0.6 * sum(seen.values())
    assert find(shape_classes(), lambda name: True) == "tiny"
    assert set(SHAPE_CLASSES) == {"tiny", "medium", "large"}


@settings(max_examples=60, database=None, suppress_health_check=list(HealthCheck))
@given(samples())
def test_every_generated_sample_is_valid_in_its_layout(sample: Sample) -> None:
    config = sample.config
    for batch in sample.batches:
        batch.validate(config)
        flat = batch.flat()
        assert flat[0].dtype == np.float32
        if config.input_layout == "stacked":
            assert flat[1].ndim == 2 and flat[1].shape[0] == config.num_tables
        if config.input_layout == "fixed":
            assert all(a.ndim == 2 for a in flat[1:])
        if config.per_sample_weights:
            assert batch.weights is not None


@given(st.data())
@settings(max_examples=40, database=None, suppress_health_check=list(HealthCheck))
def test_medium_and_large_configs_are_valid(data: st.DataObject) -> None:
    for name in ("medium", "large"):
        config = data.draw(dlrm_configs(SHAPE_CLASSES[name]))
        assert isinstance(config, DLRMConfig)
        if name == "large":
            assert config.table_kind(0) == "qr" and config.ln_emb[0] >= 2**24
            assert -(-config.ln_emb[0] // config.qr_collisions) <= 2**14 + 2**9


@pytest.mark.slow  # shrink quality of a whole sample: it varied with the run (2 of 3 full-suite runs left a knob)
def test_a_failure_needing_float16_shrinks_to_just_float16() -> None:
    seen: list[Sample] = []

    @settings(database=None, max_examples=500)
    @given(samples())
    def fails_when(sample: Sample) -> None:
        seen.append(sample)
        assert sample.config.dtype != "float16"

    with pytest.raises(AssertionError):
        fails_when()
    c = seen[-1].config
    assert c.dtype == "float16" and c.ln_emb == (1,) and not c.qr_flag
    assert {k: getattr(c, k) for k in NEW_DEFAULTS if k != "dtype"} == \
        {k: v for k, v in NEW_DEFAULTS.items() if k != "dtype"}
