"""A wrong answer that vanishes when localization looks at it (intermediates
exposed) is held out of the corpus until its model repro reproduces
(``fuzz.engine.ledger``, ``fuzz.engine.bugwork``; issue 19)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.engine.campaign import Campaign, CampaignOptions
from fuzz.model.sample import Sample
from fuzz.store import corpus
from fuzz.triage.findings import Finding
from fuzz.triage.localize import VANISHED
from oracles import Verdict
from tests.helpers import tiny_config, tiny_sample


def _file_one_shy_sample(root: Path) -> tuple[Campaign, Finding]:
    """One sample through a campaign on the shy fake, its report written."""
    campaign = Campaign(CampaignOptions(targets=("fake-shy-wrong-relu",), corpus_dir=root,
                                        workers=1, replay=False, shrink=True, report=True))
    session = campaign.session
    with session:
        sample = tiny_sample(tiny_config(sigmoid_top=0))  # no final ReLU to hide the fault
        (finding,) = campaign.filing.file(session.answered(session.submit(
            sample, campaign.targets, None)))
        campaign.bugs.write_reports()
    return campaign, finding


@pytest.mark.engine
def test_a_wrong_answer_that_vanishes_under_observation_waits_for_its_repro(
        tmp_path: Path) -> None:
    """Its case goes to the holding area, not the corpus; a repro that does not
    reproduce (a FAKE target has none) keeps it there, named in the summary,
    and it is no new bucket of the campaign."""
    root = tmp_path / "corpus"
    campaign, finding = _file_one_shy_sample(root)
    report = campaign.report
    assert finding.verdict is Verdict.MISMATCH
    assert finding.localization["note"] == VANISHED
    assert not (root / finding.bucket).exists()
    assert corpus.load(root) == ([], [])
    held = corpus.load_entry(root / corpus.HELD / finding.bucket)
    assert held.verdict is Verdict.MISMATCH and held.target == "fake-shy-wrong-relu"
    assert report.held_back == {
        finding.bucket: "its model repro does not reproduce (not written: FAKE target)"}
    assert report.new_buckets == [] and report.actionable() == ([], {})
    assert report.summary()["held_back"] == report.held_back
    listed = subprocess.run([sys.executable, "-m", "fuzz", "corpus", str(root)],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "corpus " + str(root) + ": 0 buckets" in listed.stdout
    assert "held back (.held/" in listed.stdout and finding.bucket in listed.stdout


@pytest.mark.engine
def test_a_held_case_whose_repro_reproduces_joins_the_corpus_and_is_shrunk(
        tmp_path: Path) -> None:
    """The same case, its report answering "reproduces": it moves into the
    corpus as a new bucket of the campaign and queues for shrinking, and the
    next finding of that bucket is filed as a known one."""
    root = tmp_path / "corpus"
    campaign, finding = _file_one_shy_sample(root)
    bugs, report = campaign.bugs, campaign.report
    assert bugs.is_held(finding.bucket)  # the ledger holds it (its repro did not reproduce)
    bugs.report_answered(finding.bucket, {"repro": {"status": "reproduces", "kind": "model"},
                                          "tools": {}})
    assert (root / finding.bucket / "case.json").exists()
    assert not (root / corpus.HELD / finding.bucket).exists()
    assert [entry.bucket for entry in corpus.load(root)[0]] == [finding.bucket]
    assert report.held_back == {}
    assert [f.bucket for f in report.new_buckets] == [finding.bucket]
    assert bugs.unshrunk == [finding.bucket] and finding.bucket in bugs.needs_report
    assert campaign.ledger.file(finding, finding_sample(root, finding), 0)[0] == "seen"


def finding_sample(root: Path, finding: Finding) -> Sample:
    """The stored case's sample (the one the finding was filed from)."""
    return corpus.load_entry(root / finding.bucket).sample
