"""`dlrm-fuzz run --ray`: a campaign whose workers are actors of a real local
Ray cluster finds what the local pool finds; a bad address is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'dlrm-fuzz[ray]'")

# Own pytest process (tox runs `-m ray` apart): clusters started from a
# process that has run the rest of the suite lost actors to their deadlines.
pytestmark = pytest.mark.ray

from fuzz import corpus  # noqa: E402


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fuzz", "run", *args], capture_output=True,
                          text=True, timeout=900)


def test_a_campaign_on_ray_actors_files_the_crash_and_keeps_the_passes(tmp_path: Path) -> None:
    done = _run("--ray", "local", "--workers", "2", "--targets", "fake-ok,fake-segfault",
                "--corpus", str(tmp_path / "c"), "--max-samples", "3", "--no-replay",
                "--no-shrink", "--no-report", "--no-cache", "--no-schedule")
    assert done.returncode == 0, done.stderr[-3000:]
    entries, junk = corpus.load(tmp_path / "c")
    (entry,) = [e for e in entries if e.target == "fake-segfault"]
    assert junk == [] and entry.verdict.value == "CRASH" and entry.numbers["signal"] == 11
    assert "fake-ok" in done.stdout and "PASS" in done.stdout


def test_an_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    done = _run("--ray", "127.0.0.1:9", "--targets", "fake-ok", "--corpus", str(tmp_path / "c"),
                "--max-samples", "1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("dlrm-fuzz: error:") and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())
