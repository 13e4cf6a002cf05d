"""Ctrl-C and SIGTERM end a campaign gracefully (engine tier: spawned workers,
FAKE targets): the summary so far is printed, the exit status is 130 / 143,
the corpus holds only whole entries, and no worker process outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz.store import corpus


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.engine
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), pytest.param(signal.SIGTERM, 143, marks=pytest.mark.slow)])
def test_stop_signal_prints_summary_keeps_corpus_and_reaps_workers(
        tmp_path: Path, signum: int, status: int) -> None:
    store = tmp_path / "corpus"
    # fake-raise files a bucket on the first sample (once fake-hang timed out);
    # on the second sample fake-hang again keeps a worker busy in a "compile"
    # that never ends, as a stuck compiler would: the stop lands mid-job.
    process = subprocess.Popen(
        [sys.executable, "-m", "fuzz", "run", "--targets", "fake-raise,fake-hang,fake-ok",
         "--budget", "10m", "--timeout", "15s", "--workers", "2", "--corpus", str(store),
         "--no-cache", "--seed", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    pgid = process.pid  # its own session: the group holds it and its workers
    try:
        deadline = time.monotonic() + 120
        while not (store.is_dir() and any(p.name.startswith("compile_error") for p in store.iterdir())):
            assert time.monotonic() < deadline and process.poll() is None, "no bucket filed"
            time.sleep(0.5)
        time.sleep(3.0)  # mid-job: fake-hang is "compiling" the second sample
        os.killpg(pgid, signum)  # as a terminal does: the whole process group
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(pgid, signal.SIGKILL)
    assert process.returncode == status, err
    assert "campaign summary" in out and "stopped by" in out
    assert f"stopped by {signal.Signals(signum).name}" in err
    assert "Traceback" not in err
    entries, junk = corpus.load(store)
    assert junk == [] and entries
    assert all(not p.name.startswith(".tmp-") for p in store.iterdir())
    deadline = time.monotonic() + 10
    while _alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pgid), "a worker process outlived the campaign"
