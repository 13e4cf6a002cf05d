"""The corpus store: round trip through JSON + .npz without pickles, atomic
writes, no overwriting, and junk entries skipped by name instead of fatal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fuzz import corpus
from fuzz.corpus import CorpusError
from tests.helpers import tiny_config, tiny_sample


def test_round_trip(tmp_path: Path) -> None:
    sample = tiny_sample(tiny_config(weighted_pooling="learned", index_dtype="int32"), batches=2)
    path = corpus.save(tmp_path, "mismatch-abc", {"verdict": "MISMATCH", "target": "iree-cpu"},
                       sample, {"linalg-on-tensors.mlir": "module {}"}, "full error text")
    assert path == tmp_path / "mismatch-abc"
    assert sorted(p.name for p in path.iterdir()) == [
        "case.json", "error.txt", "inputs.npz", "linalg-on-tensors.mlir"]
    entries, junk = corpus.load(tmp_path)
    assert junk == []
    (entry,) = entries
    assert entry.bucket == "mismatch-abc"
    assert entry.sample.config == sample.config
    assert entry.sample.seed == sample.seed
    assert len(entry.sample.batches) == 2
    for got, want in zip(entry.sample.batches, sample.batches):
        np.testing.assert_array_equal(got.dense, want.dense)
        for a, b in zip(got.indices + got.offsets, want.indices + want.offsets):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == np.int32
    case = json.loads((path / "case.json").read_text())
    assert case["tool_versions"]["torch"].startswith("2.13.0")
    assert case["verdict"] == "MISMATCH"


def test_existing_bucket_is_never_overwritten(tmp_path: Path) -> None:
    first = tiny_sample(seed=1)
    corpus.save(tmp_path, "b", {"verdict": "MISMATCH"}, first)
    before = (tmp_path / "b" / "inputs.npz").read_bytes()
    assert corpus.save(tmp_path, "b", {"verdict": "MISMATCH"}, tiny_sample(seed=2)) is None
    assert (tmp_path / "b" / "inputs.npz").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["b"]  # no staging folder left behind


def test_junk_entries_are_named_and_skipped(tmp_path: Path) -> None:
    corpus.save(tmp_path, "good", {"verdict": "MISMATCH"}, tiny_sample())
    (tmp_path / "bad-json").mkdir()
    (tmp_path / "bad-json" / "case.json").write_text("{not json")
    corpus.save(tmp_path, "bad-npz", {"verdict": "MISMATCH"}, tiny_sample())
    (tmp_path / "bad-npz" / "inputs.npz").write_bytes(b"garbage")
    corpus.save(tmp_path, "bad-config", {"verdict": "MISMATCH"}, tiny_sample())
    case = json.loads((tmp_path / "bad-config" / "case.json").read_text())
    case["config"]["ln_bot"] = [3, 5]
    (tmp_path / "bad-config" / "case.json").write_text(json.dumps(case))
    (tmp_path / "empty").mkdir()
    entries, junk = corpus.load(tmp_path)
    assert [e.bucket for e in entries] == ["good"]
    assert len(junk) == 4
    joined = "\n".join(junk)
    assert "bad-json" in joined and "not valid JSON" in joined
    assert "ln_bot=[3, 5]" in joined
    assert all(": skipped, " in line for line in junk)


def test_pickled_arrays_are_refused(tmp_path: Path) -> None:
    corpus.save(tmp_path, "p", {"verdict": "MISMATCH"}, tiny_sample())
    np.savez(tmp_path / "p" / "inputs.npz", b0_dense=np.array([{"evil": 1}], dtype=object))
    entries, junk = corpus.load(tmp_path)
    assert entries == [] and "Object arrays cannot be loaded" in junk[0]


def test_corpus_path_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(CorpusError, match="not a folder"):
        corpus.save(target, "b", {}, tiny_sample())
    with pytest.raises(CorpusError, match="not a folder"):
        corpus.load(target)
    assert target.read_text() == "x"
    assert corpus.load(tmp_path / "missing") == ([], [])
