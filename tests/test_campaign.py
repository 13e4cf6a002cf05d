"""A campaign survives its targets: with FAKE targets (named as such; they
only exist to test the engine) that segfault, hang and exhaust memory, the
campaign finishes, records CRASH / TIMEOUT outcomes for each sample, files one
bucket per failure kind, and loses no result of the healthy target."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fuzz.store import corpus
from fuzz.engine.campaign import CampaignOptions, run_campaign


@pytest.mark.engine
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


@pytest.mark.engine
def test_scheduled_campaign_spends_less_on_a_known_failure(tmp_path: Path) -> None:
    """Samples flow without a barrier; the target that keeps failing in the
    same known bucket is sent fewer samples (but regularly), the passing one
    every sample; all figures are in the summary."""
    options = CampaignOptions(budget_s=600, seed=3, corpus_dir=tmp_path / "corpus",
                              targets=("fake-raise", "fake-ok"), workers=2, max_samples=40,
                              shrink=False, replay=False, report=False, schedule=True)
    report = run_campaign(options)
    assert report.samples == 40 and report.harness_errors == []
    assert report.outcomes[("fake-ok", "PASS")] == 40
    raised = report.outcomes[("fake-raise", "COMPILE_ERROR")]
    assert 40 / 8 <= raised < 40
    rows = {group: (offered, run) for group, _, offered, run in report.allocation}
    # fake-raise is offered each original and, where that is skipped, the
    # repaired variant (the doomed features off: it fails the same way too).
    assert rows["fake-ok"] == (40, 40) and rows["fake-raise"][0] >= 40
    assert rows["fake-raise"][1] == raised
    assert report.confirm_runs == 0 and len(report.new_buckets) == 1
    assert list(report.first_found_s) == [report.new_buckets[0].bucket]
    assert 0 < report.first_found_s[report.new_buckets[0].bucket] < report.elapsed_s
    assert 0 < report.busy_fraction <= 1
    summary = report.summary()
    assert summary["allocation"] and summary["busy_fraction"] == round(report.busy_fraction, 3)


@pytest.mark.engine
def test_a_sample_is_never_sent_to_no_target(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The one target keeps landing in its known bucket and nothing else
    could take the sample: the scheduler's cell fades, yet every generated
    sample (or its repaired variant) still goes to it, so no sample is
    thrown away whole (``unscheduled`` 0) and each is counted as generated once."""
    from fuzz.engine.session import Session

    submitted: list[int] = []
    submit = Session.submit

    def spy(self, sample, targets, index=None):  # type: ignore[no-untyped-def]
        submitted.append(len(targets))
        return submit(self, sample, targets, index)

    monkeypatch.setattr(Session, "submit", spy)
    report = run_campaign(CampaignOptions(
        budget_s=600, seed=3, corpus_dir=tmp_path / "corpus", targets=("fake-raise",),
        workers=2, max_samples=30, shrink=False, replay=False, report=False,
        schedule=True))
    raised = report.outcomes[("fake-raise", "COMPILE_ERROR")]
    assert report.samples == 30 and raised == 30 and report.harness_errors == []
    assert report.unscheduled == 0 == report.summary()["unscheduled"]
    assert submitted == [1] * 30
    assert report.summary()["repaired"] == report.repaired > 0
    assert sum(c["generated"] for k, c in report.coverage.to_dict().items()
               if k.startswith("dtype=")) == 30


@pytest.mark.engine
def test_a_generated_sample_is_submitted_with_its_weights_form_and_draws(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The campaign sends each generated sample as drawn: a weights-as-inputs
    sample keeps its form and its extra weight draws (none is inlined on the
    way), and an inline one stays inline."""
    import fuzz.engine.campaign
    from fuzz.engine.session import Session
    from tests.helpers import tiny_config, tiny_sample

    stream = [tiny_sample(tiny_config(weights=w), seed=i) for i, w in enumerate(["inputs", "inline"] * 3)]
    stream = [dataclasses.replace(s, draws=(7, 8)) if s.config.weights == "inputs" else s
              for s in stream]

    def fixed_stream(seed, body, round_size, focus=None):  # type: ignore[no-untyped-def]
        for sample in stream:
            body(sample)

    monkeypatch.setattr(fuzz.engine.campaign, "each_sample", fixed_stream)
    submit = Session.submit
    seen: list[tuple[str, int]] = []

    def spy(self, sample, targets, index=None):  # type: ignore[no-untyped-def]
        if index is not None:
            seen.append((sample.config.weights, len(sample.draws)))
        return submit(self, sample, targets, index)

    monkeypatch.setattr(Session, "submit", spy)
    run_campaign(CampaignOptions(budget_s=600, seed=3, corpus_dir=tmp_path / "corpus",
                                 targets=("fake-ok",), workers=2, shrink=False,
                                 replay=False, report=False, schedule=True))
    assert seen == [("inputs", 2), ("inline", 0)] * 3


@pytest.mark.engine
def test_a_new_bucket_seen_on_a_partial_schedule_is_filed_from_a_full_run(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Blame compares targets: a sample the scheduler sent to only some of
    them is re-run on all before a bucket the corpus does not know is filed."""
    from fuzz.engine.schedule import Planned, Scheduler

    monkeypatch.setattr(Scheduler, "plan", lambda self, sample, targets: [
        Planned(sample, [t for t in targets if t.name != "fake-ok"])])
    options = CampaignOptions(budget_s=600, seed=3, corpus_dir=tmp_path / "corpus",
                              targets=("fake-raise", "fake-ok"), workers=2, max_samples=2,
                              shrink=False, replay=False, report=False, schedule=True)
    report = run_campaign(options)
    assert report.confirm_runs == 1  # the first sample; the second lands in a known bucket
    assert report.outcomes[("fake-ok", "PASS")] == 1  # the full re-run
    assert report.outcomes[("fake-raise", "COMPILE_ERROR")] == 3
    assert [f.sample_index for f in report.findings] == [1, 2]


@pytest.mark.engine
def test_two_campaigns_share_one_corpus_and_one_cache(tmp_path: Path) -> None:
    """Two `dlrm-fuzz run` processes on one corpus folder and one artifact
    cache at the same time: every bucket stored once, whole, and both
    campaigns' sightings recorded."""
    import json
    import subprocess
    import sys

    store, cache = tmp_path / "corpus", tmp_path / "cache"
    command = [sys.executable, "-m", "fuzz", "run", "--targets",
               "fake-raise,fake-segfault,fake-ok", "--corpus", str(store),
               "--cache", str(cache), "--max-samples", "6", "--no-replay", "--no-shrink",
               "--no-report", "--workers", "1", "--no-schedule"]
    runs = [subprocess.Popen([*command, "--seed", str(seed), "--summary-json",
                              str(tmp_path / f"s{seed}.json")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for seed in (1, 2)]
    for run in runs:
        _, err = run.communicate(timeout=900)
        assert run.returncode == 0, err
    entries, junk = corpus.load(store)
    assert junk == []
    buckets = [e.bucket for e in entries]
    assert len(buckets) == len(set(buckets)) >= 2  # raise, segfault (and any other): once each
    assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) == \
        sorted(buckets) + (["README.md"] if (store / "README.md").exists() else [])
    news = [set(json.loads((tmp_path / f"s{s}.json").read_text())["new_buckets"]) for s in (1, 2)]
    assert news[0] | news[1] == set(buckets) and not news[0] & news[1]  # each stored by one
    for entry in entries:
        assert entry.seen_on and entry.sample.batches  # whole, loadable entries


@pytest.mark.engine
def test_a_bug_of_ours_ending_a_phase_keeps_the_summary(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A HarnessError escaping a phase stops the campaign but returns its
    report (the CLI prints the summary and exits 3), naming the phase."""
    from fuzz.engine.bugwork import BugWork
    from fuzz.workers.pool import HarnessError

    def broken(self, until: float) -> None:  # type: ignore[no-untyped-def]
        raise HarnessError("bug in dlrm-fuzz while running report:x:\nTraceback\nIndexError: boom")

    monkeypatch.setattr(BugWork, "finish", broken)
    report = run_campaign(CampaignOptions(budget_s=600, seed=1, corpus_dir=tmp_path / "c",
                                          targets=("fake-raise",), workers=2, max_samples=1,
                                          shrink=False, replay=False))
    assert report.samples == 1 and len(report.new_buckets) == 1
    assert report.harness_errors == ["finish phase stopped: bug in dlrm-fuzz while running "
                                     "report:x: ... IndexError: boom"]
    assert report.summary()["harness_errors"] == report.harness_errors


@pytest.mark.engine
def test_a_sample_too_big_for_the_reference_is_skipped_not_a_bug_of_ours(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Three 2^23-row tables: float32 eager fits a 2000 MiB worker, the float64
    reference does not (PyTorch's allocator refuses). The sample is skipped
    and counted; the campaign goes on, with no harness error (exit 0)."""
    import fuzz.engine.campaign
    from tests.helpers import tiny_config, tiny_sample

    stream = [tiny_sample(tiny_config(ln_emb=(2 ** 23,) * 3)), tiny_sample()]

    def fixed_stream(seed, body, round_size, focus=None):  # type: ignore[no-untyped-def]
        for sample in stream:
            body(sample)

    monkeypatch.setattr(fuzz.engine.campaign, "each_sample", fixed_stream)
    report = run_campaign(CampaignOptions(budget_s=600, seed=1, corpus_dir=tmp_path / "c",
                                          targets=("fake-ok",), workers=1, memory_mb=2000,
                                          shrink=False, replay=False, report=False))
    assert report.harness_errors == []
    assert len(report.skipped) == 1 and "eager-f64 failed in" in report.skipped[0]
    assert "MemoryError" in report.skipped[0]
    assert report.outcomes[("fake-ok", "PASS")] == 1 and report.findings == []
    assert report.summary()["skipped"] == report.skipped


@pytest.mark.pipeline
def test_a_shape_mode_is_exported_and_imported_once_per_sample(tmp_path: Path) -> None:
    """Real pipeline, two workers, one sample on two dynamic-shape targets of
    different output types: the second waits for the first instead of
    exporting beside it, so exactly one of them spends time in export."""
    from fuzz.engine.campaign import Campaign
    from tests.helpers import tiny_config, tiny_sample

    campaign = Campaign(CampaignOptions(corpus_dir=tmp_path / "corpus", cache_dir=tmp_path / "cache",
                                        targets=("iree-torch-dyn", "iree-cpu-dyn"), workers=2))
    with campaign.session.open_pool() as pool:  # as the generate phase submits a sample
        campaign.session.pool = pool
        flight = campaign.session.answered(campaign.session.submit(
            tiny_sample(tiny_config(weights="inputs")), campaign.targets, index=1))
    timings = {t.name: r.timings for t, r in zip(flight.ordered, flight.answers[2:])}
    assert sorted(timings) == ["iree-cpu-dyn", "iree-torch-dyn"]
    assert all(r.failure is None for r in flight.answers[2:])
    assert [name for name, stages in timings.items() if "export" in stages] == ["iree-torch-dyn"]
    assert all("compile" in stages for stages in timings.values())
