"""A campaign survives its targets: with FAKE targets (named as such; they
only exist to test the engine) that segfault, hang and exhaust memory, the
campaign finishes, records CRASH / TIMEOUT outcomes for each sample, files one
bucket per failure kind, and loses no result of the healthy target."""

from __future__ import annotations

from pathlib import Path

from fuzz import corpus
from fuzz.campaign import CampaignOptions, run_campaign


def test_campaign_survives_crashing_hanging_and_oom_targets(tmp_path: Path) -> None:
    options = CampaignOptions(budget_s=300, seed=1, corpus_dir=tmp_path / "corpus",
                              targets=("fake-segfault", "fake-ok", "fake-hang", "fake-oom"),
                              workers=2, timeout_s=12, memory_mb=3072, max_samples=2,
                              shrink=False)
    report = run_campaign(options)
    assert report.samples == 2
    assert report.outcomes[("fake-ok", "PASS")] == 2
    assert report.outcomes[("fake-segfault", "CRASH")] == 2
    assert report.outcomes[("fake-hang", "TIMEOUT")] == 2
    assert report.outcomes[("fake-oom", "CRASH")] == 2
    assert report.workers_replaced == 6
    entries, junk = corpus.load(tmp_path / "corpus")
    assert junk == []
    by_target = {e.target: e for e in entries}
    assert sorted(by_target) == ["fake-hang", "fake-oom", "fake-segfault"]
    assert by_target["fake-segfault"].numbers["signal"] == 11
    assert "Segmentation fault" in by_target["fake-segfault"].detail
    assert by_target["fake-hang"].verdict.value == "TIMEOUT"
    assert by_target["fake-hang"].stage == "compile"
