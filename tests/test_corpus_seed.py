"""The quick start leaves the checkout clean (fuzz.store.seed): a campaign
reads the committed corpus as a read-only seed and writes new and smaller
cases to the user's own corpus. Fake targets keep it cheap (about 10 s)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.store import corpus
from fuzz.store.seed import default_corpus_dir, seed_corpus

ROOT = Path(__file__).resolve().parents[1]
FAKE = ("--targets", "fake-raise", "--budget", "10s", "--workers", "1", "--no-replay",
        "--no-report", "--no-cache", "--shrink-budget", "3s")


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by relative path -> content hash."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "DLRM_FUZZ_CORPUS"}
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600,
                          env={**base, "PYTHONPATH": str(ROOT), **(env or {})})


def test_default_corpus_is_outside_the_checkout(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.delenv("DLRM_FUZZ_CORPUS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_corpus_dir() == tmp_path / "dlrm-fuzz" / "corpus"
    monkeypatch.setenv("DLRM_FUZZ_CORPUS", str(tmp_path / "mine"))
    assert default_corpus_dir() == tmp_path / "mine"


def test_seeding_copies_missing_cases_only(tmp_path: Path) -> None:
    seed = tmp_path / "committed"
    shutil.copytree(ROOT / "corpus", seed)
    before = _tree(seed)
    mine = tmp_path / "mine"
    stored = sorted(p.name for p in seed.iterdir() if (p / "case.json").is_file())
    assert seed_corpus(seed, mine) == len(stored) > 0
    assert sorted(p.name for p in mine.iterdir()) == stored  # no README, no staging folders
    (mine / stored[0] / "case.json").write_text("{}")  # the user's own copy stays theirs
    assert seed_corpus(seed, mine) == 0
    assert (mine / stored[0] / "case.json").read_text() == "{}"
    assert seed_corpus(seed, seed) == 0 and seed_corpus(tmp_path / "none", mine) == 0
    assert _tree(seed) == before


@pytest.mark.engine
def test_a_campaign_leaves_the_committed_corpus_byte_identical(tmp_path: Path) -> None:
    """A checkout's corpus/ holding the real committed cases plus a fake
    bucket (so the campaign meets a known bucket and may store a smaller case
    of it): run from that checkout with the default corpus, nothing in it
    changes; the user's corpus has the seed, the fake bucket and its shrink."""
    checkout = tmp_path / "checkout"
    committed = checkout / "corpus"
    shutil.copytree(ROOT / "corpus", committed)
    first = _cli("run", *FAKE, "--seed", "0", "--max-samples", "1", "--no-shrink",
                 "--corpus", str(committed), cwd=checkout)  # asked for by name: writes there
    assert first.returncode == 0, first.stderr
    (fake,) = {e.bucket for e in corpus.load(committed)[0] if e.target == "fake-raise"}
    before = _tree(committed)

    data = tmp_path / "data"
    done = _cli("run", *FAKE, "--seed", "1", "--max-samples", "6", cwd=checkout,
                env={"XDG_DATA_HOME": str(data)})
    assert done.returncode == 0, done.stderr
    mine = data / "dlrm-fuzz" / "corpus"
    assert f"corpus={mine} (seeded with {len(corpus.load(committed)[0])} cases from corpus)" \
        in done.stdout
    assert _tree(committed) == before  # byte-identical
    assert {e.bucket for e in corpus.load(mine)[0]} >= {e.bucket for e in
                                                       corpus.load(committed)[0]}
    assert f"NEW  sample" not in done.stdout or fake not in done.stdout.split("NEW", 1)[1]
