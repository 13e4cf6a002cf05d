"""The corpus as a regression suite: how runs of a stored case are judged
(unit), and `dlrm-fuzz replay` on FAKE targets (engine tier): a fake fix is
XPASS, --strict fails until --update records it, then it is an expected PASS."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.store import corpus
from fuzz.engine.campaign import Campaign, CampaignOptions, ReplayRecord
from fuzz.engine.records import Observed
from fuzz.store.corpus import CorpusEntry
from fuzz.regress.replay import ReplayStatus, judge_runs
from oracles import Verdict
from tests.helpers import tiny_sample


def _entry(**fields: object) -> CorpusEntry:
    values: dict[str, object] = dict(bucket="b", signature="k", verdict=Verdict.COMPILE_ERROR,
                                     owner="o", target="t", sample=tiny_sample())
    values.update(fields)
    return CorpusEntry(**values)  # type: ignore[arg-type]


def _run(status: str, *now: str) -> ReplayRecord:
    return ReplayRecord("b", "t", Observed(status), tuple(now))


def test_runs_are_judged_against_what_the_corpus_expects() -> None:
    failing, fixed = _entry(), _entry(expect="pass")
    assert judge_runs(failing, [_run("still-failing", "b")]) is ReplayStatus.XFAIL
    assert judge_runs(failing, [_run("fixed")] * 3) is ReplayStatus.XPASS
    assert judge_runs(failing, [_run("moved", "c")] * 3) is ReplayStatus.MOVED
    assert judge_runs(failing, [_run("fixed"), _run("still-failing", "b")]) is ReplayStatus.FLAKY
    assert judge_runs(failing, [_run("skipped")]) is ReplayStatus.SKIPPED
    assert judge_runs(fixed, [_run("fixed")]) is ReplayStatus.PASS
    assert judge_runs(fixed, [_run("still-failing", "b")] * 3) is ReplayStatus.REGRESSED
    moved = _entry(moved_to=("c",))
    assert judge_runs(moved, [_run("moved", "c")]) is ReplayStatus.XFAIL  # as recorded
    assert judge_runs(moved, [_run("moved", "d")] * 3) is ReplayStatus.MOVED


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.engine
def test_fake_fix_is_xpass_strict_fails_until_update_records_it(tmp_path: Path) -> None:
    store = tmp_path / "corpus"
    Campaign(CampaignOptions(targets=("fake-raise",), corpus_dir=store, max_samples=1,
                             replay=False, shrink=False, report=False, workers=1)).run()
    (stored,) = corpus.load(store)[0]
    assert stored.path is not None
    fixed = store / "compile_error-000000000001"
    shutil.copytree(stored.path, fixed)
    case = json.loads((fixed / "case.json").read_text())
    case.update(bucket=fixed.name, target="fake-ok")  # the "toolchain" no longer fails
    (fixed / "case.json").write_text(json.dumps(case))
    common = ("--workers", "1", "--no-cache", "--repeat", "2")

    relaxed = _cli("replay", str(store), *common)
    assert relaxed.returncode == 0, relaxed.stderr
    assert f"XFAIL     {stored.bucket}" in relaxed.stdout
    assert f"XPASS     {fixed.name}  fake-ok" in relaxed.stdout and "(2 runs)" in relaxed.stdout
    assert "replay: 1 XFAIL, 1 XPASS" in relaxed.stdout

    assert _cli("replay", str(store), "--strict", *common).returncode == 1
    updated = _cli("replay", str(store), "--strict", "--update", *common)
    assert updated.returncode == 0, updated.stdout
    assert corpus.load_entry(fixed).expect == "pass"
    assert corpus.load_entry(fixed).fixed_in is not None
    after = _cli("replay", str(store), "--strict", *common)
    assert after.returncode == 0 and f"PASS      {fixed.name}" in after.stdout
