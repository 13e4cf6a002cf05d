"""What the rest of dlrm-fuzz derives from a ``DLRMConfig`` knob, pinned
byte for byte (issue 21): the feature strings of ``Sample.features()`` (the
coarsest bucket key, the scheduler's cells), the ablation names (a
mismatch's ``features:`` culprit, so its bucket id), the coverage keys, what
a repair switches off, and the matrix rows. A refactor of where knob
metadata lives must leave every one of them as it was.

The expected values are in ``tests/data/knob_contract.json``, recorded from
the code before the knob declarations moved onto the config: hand-built
configs covering every value of every knob (version independent), and the
first samples of the default stream for three seeds (Hypothesis decides
those draws, so that part runs only under the Hypothesis version it was
recorded with, each in a fresh interpreter). An intended change of a name
is a change of bucket ids: re-record with ``python -m tests.test_knob_contract``
and say so in the commit. Unit tier: no compiler, no workers."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import hypothesis
import pytest

from fuzz.engine.coverage import knob_values
from fuzz.model.config import DLRMConfig, config_with
from fuzz.model.sample import Sample
from fuzz.regress.matrix import FEATURES, feature_sample
from fuzz.triage import ablate, repair
from strategies.draw import draw_samples
from tests.helpers import tiny_config, varied_sample

EXPECTED = Path(__file__).parent / "data" / "knob_contract.json"
STREAM_SEEDS = (0, 1, 2)
STREAM_COUNT = 10

# Every value of every knob on a three-table model, the switches that only
# matter together (QR or MD on with and without a table past the threshold,
# self-interaction under cat), and busy combinations.
CONFIGS: dict[str, dict[str, Any]] = {
    "plain": {},
    "cat": {"arch_interaction_op": "cat"},
    "itself": {"arch_interaction_itself": True},
    "cat+itself": {"arch_interaction_op": "cat", "arch_interaction_itself": True},
    "sigmoid_bot": {"sigmoid_bot": 0},
    "sigmoid_top": {"sigmoid_top": 0},
    "clamp": {"loss_threshold": 0.01},
    "clamp_max": {"loss_threshold": 0.5},
    "wp_fixed": {"weighted_pooling": "fixed"},
    "wp_learned": {"weighted_pooling": "learned"},
    "qr_no_table": {"qr_flag": True},
    "qr_mult": {"qr_flag": True, "qr_threshold": 15},
    "qr_add": {"qr_flag": True, "qr_threshold": 15, "qr_operation": "add"},
    "qr_concat": {"qr_flag": True, "qr_threshold": 5, "qr_operation": "concat"},
    "qr_op_without_flag": {"qr_operation": "add"},
    "qr_collisions": {"qr_flag": True, "qr_threshold": 15, "qr_collisions": 2},
    "md": {"md_flag": True, "md_threshold": 15},
    "md_widths": {"md_flag": True, "md_threshold": 15, "m_spa": (2, 4, 4)},
    "md_no_table": {"md_flag": True},
    "md_threshold_only": {"md_threshold": 3},
    "q8": {"quantize_bits": 8},
    "q4": {"quantize_bits": 4},
    "int32": {"index_dtype": "int32"},
    "float16": {"dtype": "float16"},
    "bfloat16": {"dtype": "bfloat16"},
    "mlp_qint8": {"quantize_mlp": "qint8"},
    "mlp_float16": {"quantize_mlp": "float16"},
    "mean": {"pooling": "mean"},
    "max": {"pooling": "max"},
    "last_offset": {"include_last_offset": True},
    "padding0": {"padding_idx": 0},
    "padding1": {"padding_idx": 1},
    "psw": {"per_sample_weights": True},
    "stacked": {"input_layout": "stacked"},
    "fixed": {"input_layout": "fixed"},
    "weights_inputs": {"weights": "inputs"},
    "busy_upstream": {"qr_flag": True, "qr_threshold": 15, "qr_operation": "add",
                      "weighted_pooling": "fixed", "index_dtype": "int32",
                      "arch_interaction_op": "cat", "loss_threshold": 0.1, "sigmoid_top": 0},
    "busy_descendant": {"dtype": "float16", "pooling": "mean", "input_layout": "stacked",
                        "include_last_offset": True, "padding_idx": 2,
                        "arch_interaction_itself": True, "weights": "inputs"},
    "busy_quantized": {"quantize_bits": 4, "quantize_mlp": "qint8", "md_threshold": 3,
                       "sigmoid_bot": 0, "input_layout": "fixed"},
}

# The matrix's rows as they were: label -> changes on the minimal model, in order.
MATRIX: dict[str, dict[str, Any]] = {
    "plain": {},
    "interaction=cat": {"arch_interaction_op": "cat"},
    "interaction_itself": {"arch_interaction_itself": True},
    "sigmoid_bot": {"sigmoid_bot": 0},
    "sigmoid_top": {"sigmoid_top": 0},
    "clamp (loss_threshold)": {"loss_threshold": 0.01},
    "weighted_pooling=fixed": {"weighted_pooling": "fixed"},
    "weighted_pooling=learned": {"weighted_pooling": "learned"},
    "qr=mult": {"qr_flag": True, "qr_threshold": 4, "qr_operation": "mult"},
    "qr=add": {"qr_flag": True, "qr_threshold": 4, "qr_operation": "add"},
    "qr=concat": {"qr_flag": True, "qr_threshold": 4, "qr_operation": "concat"},
    "md": {"md_flag": True, "md_threshold": 4, "m_spa": (2, 4)},
    "quantized=8": {"quantize_bits": 8},
    "quantized=4": {"quantize_bits": 4},
    "index_dtype=int32": {"index_dtype": "int32"},
    "empty_bags": {},
    "dtype=float16": {"dtype": "float16"},
    "dtype=bfloat16": {"dtype": "bfloat16"},
    "quantize_mlp=qint8": {"quantize_mlp": "qint8"},
    "quantize_mlp=float16": {"quantize_mlp": "float16"},
    "pooling=mean": {"pooling": "mean"},
    "pooling=max": {"pooling": "max"},
    "include_last_offset": {"include_last_offset": True},
    "padding_idx": {"padding_idx": 1},
    "per_sample_weights": {"per_sample_weights": True},
    "input_layout=stacked": {"input_layout": "stacked"},
    "input_layout=fixed": {"input_layout": "fixed"},
}


def _config(name: str) -> DLRMConfig:
    config = config_with(tiny_config(), **CONFIGS[name])
    assert config is not None, f"{name}: {CONFIGS[name]} gives no valid config"
    return config


def _switched_off(sample: Sample, feature: str) -> list[str] | None:
    off = repair.switch_off(sample, feature)
    return None if off is None else off.features()


def observe(sample: Sample) -> dict[str, Any]:
    """Every name the rest of dlrm-fuzz gives ``sample``'s knobs."""
    features = sample.features()
    return {
        "features": features,
        "ablation": list(ablate.features(sample)),
        "coverage": knob_values(sample),
        "repairable": [f for f in features if repair.repairable(f)],
        "switched_off": {f: _switched_off(sample, f) for f in features},
    }


def _hand_built_samples() -> dict[str, Sample]:
    """Each config as the matrix builds its rows (valid in every layout), and
    the busy ones with empty bags and with batches of several shapes too."""
    samples = {name: feature_sample("plain", 0, _config(name)) for name in CONFIGS}
    for name in ("busy_upstream", "busy_descendant"):
        samples[f"{name}+empty_bags"] = feature_sample("empty_bags", 0, _config(name))
    samples["busy_upstream+varied"] = varied_sample(_config("busy_upstream"))
    return samples


def _stream() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for seed in STREAM_SEEDS:
        out[str(seed)] = [
            {"config": hashlib.sha256(s.config.to_json().encode()).hexdigest()[:16], **observe(s)}
            for s in draw_samples(STREAM_COUNT, seed)]
    return out


def _expected() -> dict[str, Any]:
    return json.loads(EXPECTED.read_text())


def _json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists)."""
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("name", [*CONFIGS, "busy_upstream+empty_bags",
                                  "busy_descendant+empty_bags", "busy_upstream+varied"])
def test_hand_built_configs_keep_every_name(name: str) -> None:
    assert _json(observe(_hand_built_samples()[name])) == _expected()["hand_built"][name]


def test_the_matrix_keeps_its_rows_in_order() -> None:
    assert list(FEATURES) == list(MATRIX)
    assert FEATURES == MATRIX
    assert _json(FEATURES) == _expected()["matrix"]


@pytest.mark.engine
def test_the_default_stream_keeps_its_configs_and_names() -> None:
    """In a fresh interpreter, as a campaign draws it: Hypothesis keeps the
    constants earlier ``@given`` tests drew from in a cache of its own
    (``CONSTANTS_CACHE``), which ``each_sample``'s empty pool does not reach."""
    expected = _expected()
    if hypothesis.__version__ != expected["hypothesis"]:
        pytest.skip(f"the stream was recorded under Hypothesis {expected['hypothesis']}; "
                    f"{hypothesis.__version__} may draw other samples")
    done = subprocess.run([sys.executable, "-c", "import json, tests.test_knob_contract as t; "
                           "print(json.dumps(t._stream()))"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected["stream"]


def record() -> None:
    """Write today's names as the expected ones (an intended change only)."""
    data = {"hypothesis": hypothesis.__version__,
            "hand_built": {name: observe(s) for name, s in _hand_built_samples().items()},
            "matrix": FEATURES, "stream": _stream()}
    EXPECTED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record()
