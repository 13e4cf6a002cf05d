"""The command line as a user meets it: bad input is one line and exit 2,
``targets`` lists the table, and a short real campaign on the CPU stores
real failures of the pinned toolchain without touching existing entries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.store import corpus
from fuzz.cli.main import main, parse_duration
from fuzz.triage.edits import size_key
from fuzz.targets.catalog import TARGETS


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.mark.engine
@pytest.mark.parametrize("args, message", [
    (["run", "--targets", "iree-nope"], "target='iree-nope': unknown"),
    (["run", "--budget", "soon"], "duration='soon'"),
    (["run", "--workers", "0"], "value='0'"),
    (["launch"], "invalid choice: 'launch'"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    done = _cli(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.engine
def test_corpus_that_is_a_file_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "corpus"
    path.write_text("precious")
    done = _cli("run", "--corpus", str(path), "--budget", "1s")
    assert done.returncode == 2 and "is not a folder" in done.stderr
    assert "Traceback" not in done.stderr
    assert path.read_text() == "precious"


def test_shrink_share_is_a_fraction_of_generation_time() -> None:
    """--shrink-share takes a fraction in (0, 1] (default 0.4, the campaign's);
    anything else is a one-line error naming the option and an example."""
    import argparse

    from fuzz.cli.main import _parser
    from fuzz.engine.records import CampaignOptions

    parse = _parser().parse_args
    assert parse(["run"]).shrink_share == CampaignOptions().shrink_share == 0.4
    assert parse(["run", "--shrink-share", "0.15"]).shrink_share == 0.15
    from fuzz.cli.options import _shrink_share
    for bad in ("0", "1.5", "half"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"shrink-share='{bad}': must be a fraction"):
            _shrink_share(bad)


def test_parse_duration() -> None:
    assert parse_duration("90") == 90 and parse_duration("2m") == 120
    assert parse_duration("1.5h") == 5400


@pytest.mark.engine
def test_targets_lists_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in out.splitlines() if line.count("│") >= 3 and line.split("│")[1].strip()}
    for name in TARGETS:
        assert name in rows, name
    for name in ("iree-cpu", "iree-cpu-sync", "iree-vmvx", "iree-torch", "refbackend",
                 "iree-vulkan", "iree-cpu-dyn", "iree-vulkan-dyn"):
        assert rows[name] == "yes", (name, rows[name])
    if rows["iree-cuda"] == "no":
        assert "no CUDA device" in out  # says why, and what it needs
    assert rows["fake-segfault"] == "FAKE"


@pytest.mark.slow
@pytest.mark.pipeline
def test_short_campaign_stores_real_failures(tmp_path: Path) -> None:
    store = tmp_path / "corpus"
    common = ("--budget", "120s", "--max-samples", "12", "--seed", "0", "--corpus", str(store),
              "--workers", "2", "--targets", "iree-cpu,iree-cpu-dyn", "--cache", str(tmp_path / "cache"),
              "--no-shrink")
    done = _cli("run", *common)
    assert done.returncode == 0, done.stderr
    assert "campaign summary" in done.stdout
    entries, junk = corpus.load(store)
    assert junk == []
    assert entries, f"no failure found in 12 samples:\n{done.stdout}"
    verdicts = {e.verdict.value for e in entries}
    assert verdicts & {"MISMATCH", "LOWERING_INVALID_IR", "LOWERING_UNSUPPORTED_OP"}
    for entry in entries:
        assert entry.tool_versions["torch-mlir"] == "20261001"
        assert entry.target in ("iree-cpu", "iree-cpu-dyn")
        assert set(entry.seen_on) <= {"iree-cpu", "iree-cpu-dyn"}
        assert entry.error or entry.culprit
    snapshot = {e.bucket: size_key(e.sample) for e in entries}

    again = _cli("run", *common)
    assert again.returncode == 0, again.stderr
    assert "NEW" not in again.stdout  # same seed, same findings, all already stored
    assert again.stdout.count("still-failing") == len(snapshot)  # the replay phase
    after, junk = corpus.load(store)
    assert junk == [] and {e.bucket for e in after} == set(snapshot)
    # A stored case only ever gets smaller (a warm cache lets the second run
    # get through more samples, which may hold a smaller case of a bucket).
    assert all(size_key(e.sample) <= snapshot[e.bucket] for e in after)

    listing = _cli("corpus", str(store))
    assert listing.returncode == 0
    assert all(bucket[:20] in listing.stdout for bucket in snapshot)


@pytest.mark.engine
def test_unavailable_target_is_one_line_exit_2(tmp_path: Path) -> None:
    ok, _ = TARGETS["iree-hip"].availability()
    if ok:
        pytest.skip("this machine has an AMD GPU")
    done = _cli("run", "--targets", "iree-cpu,iree-hip", "--corpus", str(tmp_path))
    assert done.returncode == 2
    assert "target='iree-hip': not available here: no HIP device" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
