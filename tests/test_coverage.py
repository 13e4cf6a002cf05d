"""The end-of-campaign coverage table: knob values read from the config,
shape classes, and how far the furthest target got (unit), and the table a
real campaign prints (engine tier, fake targets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fuzz.engine.coverage import COLUMNS, Coverage, knob_values, shape_class
from fuzz.model.sample import Batch, Sample
from oracles.results import Stage
from oracles.verdict import Outcome, Verdict
from tests.helpers import tiny_config, tiny_sample


def test_knob_values_name_every_switch_and_skip_sizes() -> None:
    sample = tiny_sample(tiny_config(qr_flag=True, qr_operation="add", qr_threshold=5,
                                     weighted_pooling="fixed", sigmoid_top=0))
    knobs = set(knob_values(sample))
    assert {"qr_flag=True", "qr_operation=add", "weighted_pooling=fixed", "sigmoid_top=on",
            "sigmoid_bot=off", "clamp=off", "index_dtype=int64", "quantize_bits=32",
            "shape=tiny", "input=empty_bags"} <= knobs
    assert not any(k.startswith(("ln_", "m_spa", "qr_threshold", "schema")) for k in knobs)
    plain = set(knob_values(tiny_sample()))
    assert "qr_flag=False" in plain and not any(k.startswith("qr_operation") for k in plain)


def test_shape_classes_follow_the_sizes() -> None:
    assert shape_class(tiny_sample()) == "tiny"
    wide = tiny_config(m_spa=32, ln_bot=(3, 32), ln_top=(38, 1))
    assert shape_class(tiny_sample(wide)) == "medium"
    many_rows = tiny_config(ln_emb=(10, 5000, 30))
    assert shape_class(tiny_sample(many_rows)) == "medium"
    huge = tiny_config(ln_emb=(2 ** 24 + 5,), ln_top=(5, 1))
    batch = Batch(np.zeros((1, 3), np.float32), (np.array([0]),), (np.array([2 ** 24 + 4]),))
    assert shape_class(Sample(huge, 0, (batch,))) == "large"
    one = Sample(tiny_config(), 0, (Batch(np.zeros((1, 3), np.float32),
                                          (np.array([0]),) * 3, (np.array([1]),) * 3),))
    assert "input=batch_of_one" in knob_values(one)


def _outcome(verdict: Verdict, stage: Stage) -> Outcome:
    return Outcome(target="t", verdict=verdict, stage=stage)


def test_a_sample_counts_as_far_as_its_furthest_target_got() -> None:
    coverage = Coverage()
    sample = tiny_sample(tiny_config(index_dtype="int32"))
    coverage.add(sample, {"a": _outcome(Verdict.LOWERING_INVALID_IR, Stage.IMPORT),
                          "b": _outcome(Verdict.COMPILE_ERROR, Stage.COMPILE)})
    coverage.add(sample, {"a": _outcome(Verdict.EXPORT_ERROR, Stage.EXPORT)})
    coverage.add(sample, {"a": _outcome(Verdict.MISMATCH, Stage.RUN),
                          "b": _outcome(Verdict.PASS, Stage.RUN)})
    row = dict(coverage.rows())["index_dtype=int32"]
    assert dict(zip(COLUMNS, row)) == {"generated": 3, "exported": 2, "lowered": 2,
                                       "compiled": 1, "ran": 1, "passed": 1}
    assert coverage.to_dict()["index_dtype=int32"]["lowered"] == 2


@pytest.mark.engine
def test_campaign_prints_and_records_coverage(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", "--targets", "fake-ok", "--corpus",
         str(tmp_path / "c"), "--max-samples", "4", "--no-replay", "--no-shrink", "--no-report",
         "--workers", "1", "--no-cache", "--summary-json", str(tmp_path / "s.json")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "coverage: samples per knob value" in done.stdout
    coverage = json.loads((tmp_path / "s.json").read_text())["coverage"]
    generated = sum(v["generated"] for k, v in coverage.items() if k.startswith("shape="))
    assert generated == 4
    assert all(v["passed"] <= v["ran"] <= v["generated"] for v in coverage.values())
    assert any(v["passed"] for v in coverage.values())  # fake-ok is eager PyTorch
