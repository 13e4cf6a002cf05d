"""The corpus store: round trip through JSON + .npz without pickles, atomic
writes, no overwriting, and junk entries skipped by name instead of fatal."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from fuzz.store import corpus
from fuzz.store.corpus import CorpusEntry, CorpusError
from fuzz.model.sample import Sample
from oracles import Stage, Verdict
from tests.helpers import tiny_config, tiny_sample


def entry(bucket: str, sample: Sample, **fields: object) -> CorpusEntry:
    values: dict[str, object] = dict(signature=f"MISMATCH|owner|{bucket}",
                                     verdict=Verdict.MISMATCH, owner="torch-mlir:linalg-on-tensors",
                                     target="iree-cpu", seen_on=("iree-cpu",))
    values.update(fields)
    return CorpusEntry(bucket=bucket, sample=sample, **values)  # type: ignore[arg-type]


def test_round_trip(tmp_path: Path) -> None:
    sample = tiny_sample(tiny_config(weighted_pooling="learned", index_dtype="int32"), batches=2)
    stored = entry("mismatch-abc", sample, stage=Stage.RUN, culprit="op:aten.x[y]",
                   texts={"linalg-on-tensors.mlir": "module {}"}, detail="full error text",
                   shrink={"steps_tried": 3})
    path = corpus.save(tmp_path, stored)
    assert path == tmp_path / "mismatch-abc"
    assert sorted(p.name for p in path.iterdir()) == [
        "case.json", "error.txt", "inputs.npz", "linalg-on-tensors.mlir"]
    entries, junk = corpus.load(tmp_path)
    assert junk == []
    (loaded,) = entries
    assert loaded == dataclasses.replace(stored, path=path)  # every case field round-trips
    assert loaded.detail == "full error text"
    assert loaded.sample.config == sample.config
    assert loaded.sample.seed == sample.seed
    assert len(loaded.sample.batches) == 2
    for got, want in zip(loaded.sample.batches, sample.batches):
        np.testing.assert_array_equal(got.dense, want.dense)
        for a, b in zip(got.indices + got.offsets, want.indices + want.offsets):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == np.int32
    case = json.loads((path / "case.json").read_text())
    assert case["tool_versions"]["torch"].startswith("2.13.0")
    assert case["verdict"] == "MISMATCH"


def test_existing_bucket_is_never_overwritten(tmp_path: Path) -> None:
    first = tiny_sample(seed=1)
    corpus.save(tmp_path, entry("b", first))
    before = (tmp_path / "b" / "inputs.npz").read_bytes()
    assert corpus.save(tmp_path, entry("b", tiny_sample(seed=2))) is None
    assert (tmp_path / "b" / "inputs.npz").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name != ".lock"] == ["b"]  # no staging left


def test_junk_entries_are_named_and_skipped(tmp_path: Path) -> None:
    corpus.save(tmp_path, entry("good", tiny_sample()))
    (tmp_path / "bad-json").mkdir()
    (tmp_path / "bad-json" / "case.json").write_text("{not json")
    corpus.save(tmp_path, entry("bad-npz", tiny_sample()))
    (tmp_path / "bad-npz" / "inputs.npz").write_bytes(b"garbage")
    corpus.save(tmp_path, entry("bad-config", tiny_sample()))
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
    corpus.save(tmp_path, entry("p", tiny_sample()))
    np.savez(tmp_path / "p" / "inputs.npz", b0_dense=np.array([{"evil": 1}], dtype=object))
    entries, junk = corpus.load(tmp_path)
    assert entries == [] and "Object arrays cannot be loaded" in junk[0]


def test_corpus_path_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(CorpusError, match="not a folder"):
        corpus.save(target, entry("b", tiny_sample()))
    with pytest.raises(CorpusError, match="not a folder"):
        corpus.load(target)
    assert target.read_text() == "x"
    assert corpus.load(tmp_path / "missing") == ([], [])


def _size(sample: Sample) -> tuple[int, ...]:
    return (sample.config.num_tables, sum(b.batch_size for b in sample.batches))


def test_smaller_case_replaces_atomically_larger_never(tmp_path: Path) -> None:
    big = tiny_sample(batches=2)
    small = tiny_sample(tiny_config(m_spa=4, ln_emb=(10,), ln_top=(5, 1)))
    corpus.save(tmp_path, entry("b", big, seen_on=("iree-cpu", "refbackend")))
    assert not corpus.replace_if_smaller(tmp_path, entry("b", big), _size)  # equal: kept
    assert corpus.replace_if_smaller(tmp_path, entry("b", small, seen_on=("iree-vmvx",)), _size)
    (stored,) = corpus.load(tmp_path)[0]
    assert stored.sample.config.num_tables == 1
    assert stored.seen_on == ("iree-cpu", "iree-vmvx", "refbackend")  # merged, not lost
    assert not corpus.replace_if_smaller(tmp_path, entry("b", big), _size)  # larger: never
    assert corpus.load(tmp_path)[0][0].sample.config.num_tables == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "b"]  # old case cleaned up


def test_seen_on_grows_and_never_shrinks(tmp_path: Path) -> None:
    corpus.save(tmp_path, entry("b", tiny_sample()))
    assert corpus.record_seen(tmp_path, "b", ["iree-vmvx", "iree-cpu"])
    assert not corpus.record_seen(tmp_path, "b", ["iree-cpu"])
    assert corpus.load(tmp_path)[0][0].seen_on == ("iree-cpu", "iree-vmvx")
    assert not corpus.record_seen(tmp_path, "missing", ["x"])


def _record_many(root: str, prefix: str) -> None:
    for i in range(20):
        corpus.record_seen(Path(root), "b", [f"{prefix}-{i}"])


@pytest.mark.engine
def test_concurrent_seen_on_updates_lose_nothing(tmp_path: Path) -> None:
    corpus.save(tmp_path, entry("b", tiny_sample()))
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_record_many, args=(str(tmp_path), p)) for p in "xy"]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    seen = corpus.load(tmp_path)[0][0].seen_on
    assert len(seen) == 41 and {f"x-{i}" for i in range(20)} <= set(seen)
