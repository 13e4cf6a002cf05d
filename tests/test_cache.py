"""The artifact cache: hits return exactly what was stored, failures are
cached too, a corrupt file is a miss (never a wrong result), the folder stays
within its bound, and concurrent writers never leave a torn entry."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from fuzz.targets.cache import ArtifactCache, cache_key
from oracles.results import Failure, Stage


def test_round_trip_of_each_kind(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    failure = Failure(Stage.IMPORT, "TorchMlirCompilerError", "error: x", program="module {}")
    for key, value in (("a" * 64, "module {}"), ("b" * 64, b"\x00vmfb"), ("c" * 64, failure)):
        assert cache.get(key) is None
        cache.put(key, value)
        assert cache.get(key) == value
    assert (cache.hits, cache.misses) == (3, 3)


def test_key_depends_on_every_part() -> None:
    assert cache_key("vmfb", "m", "llvm-cpu", ["-O1"]) != cache_key("vmfb", "m", "llvm-cpu", ["-O2"])
    assert cache_key("vmfb", "m", {"torch": "2.13.0"}) != cache_key("vmfb", "m", {"torch": "2.14.0"})
    assert cache_key("x", [1, 2]) == cache_key("x", [1, 2])


def test_corrupt_entry_is_a_miss_and_removed(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    key = cache_key("vmfb", "program")
    cache.put(key, b"good bytes")
    path = next(tmp_path.glob("*/*.bin"))
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert cache.get(key) is None
    assert not path.exists()
    path.parent.joinpath(f"{key}.bin").write_bytes(b"truncated")
    assert cache.get(key) is None


def test_size_bound_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path, max_bytes=10_000)
    for i in range(30):
        cache.put(cache_key(i), bytes(1000))
    assert cache.size_bytes() <= 10_000
    assert cache.get(cache_key(29)) == bytes(1000)  # the newest survives
    assert cache.get(cache_key(0)) is None


def _writer(root: str, n: int) -> None:
    cache = ArtifactCache(Path(root))
    for i in range(50):
        cache.put(cache_key("shared", i % 5), bytes([n]) * 20_000)


@pytest.mark.engine
def test_concurrent_writers_leave_whole_entries(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_writer, args=(str(tmp_path), n)) for n in (1, 2, 3)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=120)
        assert w.exitcode == 0
    cache = ArtifactCache(tmp_path)
    for i in range(5):
        value = cache.get(cache_key("shared", i))
        assert isinstance(value, bytes) and len(value) == 20_000 and len(set(value)) == 1
    assert not list(tmp_path.glob("*/.tmp-*"))


def test_writes_keep_an_exact_ledger_without_scanning(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ArtifactCache(tmp_path, max_bytes=50_000)
    scans = []
    real = ArtifactCache._entries
    monkeypatch.setattr(ArtifactCache, "_entries", lambda self: scans.append(1) or real(self))
    for i in range(60):
        cache.put(cache_key(i), bytes(1000))
    # One count to start the ledger, then a scan only per eviction (each frees
    # 10% of the bound, about 5 entries): not one scan per write.
    assert 2 <= len(scans) <= 5
    assert int((tmp_path / ".size").read_text()) == sum(
        p.stat().st_size for p in tmp_path.glob("*/*.bin"))
    assert cache.size_bytes() <= 50_000
    cache.put(cache_key(59), bytes(10))  # overwriting an entry replaces its size
    assert int((tmp_path / ".size").read_text()) == cache.size_bytes()
