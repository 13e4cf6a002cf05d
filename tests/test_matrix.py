"""The lowering support matrix: every feature row is a valid minimal DLRM
with that feature on (unit), the table and its diff render as documented
(unit), and a real run tells a healthy feature from the weighted-pooling bug."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.regress.matrix import FEATURES, Matrix, compare_matrices, feature_sample, matrix_markdown


@pytest.mark.parametrize("feature", list(FEATURES))
def test_each_feature_row_turns_on_exactly_its_feature(feature: str) -> None:
    sample = feature_sample(feature, seed=0)
    plain = feature_sample("plain", seed=0)
    if feature == "plain":
        return
    changed = sample.config != plain.config or sample.features() != plain.features()
    assert changed, f"{feature} changed nothing"
    if feature == "empty_bags":
        assert "empty_bags" in sample.features() and "empty_bags" not in plain.features()


def test_markdown_labels_buckets_and_diff_lists_changed_cells() -> None:
    old = Matrix(["iree-cpu", "refbackend"],
                 {"plain": {"iree-cpu": "PASS", "refbackend": "PASS"},
                  "weighted_pooling=fixed": {"iree-cpu": "mismatch-x", "refbackend": "mismatch-x"}},
                 {"mismatch-x": "op:aten.embedding_bag.padding_idx[per_sample_weights]"})
    text = matrix_markdown(old)
    assert "| feature | iree-cpu | refbackend |" in text
    assert "| weighted_pooling=fixed | B1 | B1 |" in text and "| plain | pass | pass |" in text
    assert "- B1 `mismatch-x`: op:aten.embedding_bag" in text
    fixed = Matrix.from_json(old.to_json())
    fixed.cells["weighted_pooling=fixed"]["iree-cpu"] = "PASS"
    assert compare_matrices(old, fixed) == ["weighted_pooling=fixed x iree-cpu: mismatch-x -> PASS"]


@pytest.mark.slow  # 46 s in CI's run: two real matrices
@pytest.mark.pipeline
def test_real_matrix_tells_healthy_from_weighted_pooling(tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    done = subprocess.run([sys.executable, "-m", "fuzz", "matrix", "--targets", "refbackend,iree-cpu",
                           "--features", "plain,weighted_pooling=fixed", "--seeds", "1",
                           "--json", str(out), "--no-cache", "--workers", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    cells = json.loads(out.read_text())["cells"]
    assert cells["plain"] == {"refbackend": "PASS", "iree-cpu": "PASS"}
    pooled = cells["weighted_pooling=fixed"]
    assert pooled["refbackend"] == pooled["iree-cpu"] and pooled["iree-cpu"].startswith("mismatch-")
    again = subprocess.run([sys.executable, "-m", "fuzz", "matrix", "--targets", "refbackend,iree-cpu",
                            "--features", "plain", "--seeds", "1", "--against", str(out), "--no-cache"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "changed against" in again.stdout and ": 0 cells" in again.stdout
