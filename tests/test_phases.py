"""The campaign's phases and triage (engine tier: spawned workers, FAKE
targets; the last tests run the real pipeline): replay tells still failing /
fixed / moved apart; two bugs never share a bucket; shrinking keeps the
bucket and ends at the smallest case."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fuzz.store import corpus
from fuzz.engine.campaign import Campaign, CampaignOptions
from fuzz.engine.records import Observed, ReplayRecord
from fuzz.model.sample import Batch, Sample
from fuzz.targets.catalog import EAGER, REFERENCE, resolve_targets
from fuzz.triage.edits import content_hash
from fuzz.triage.findings import Triage
from fuzz.workers.pool import WorkerPool
from oracles import Tolerance, Verdict, bucket_for, mismatch_key
from tests.helpers import file_as_generated, tiny_config, tiny_sample


def _rewrite(folder: Path, **changes: str) -> None:
    case = json.loads((folder / "case.json").read_text())
    case.update(changes)
    (folder / "case.json").write_text(json.dumps(case))


@pytest.mark.engine
def test_replay_tells_still_failing_fixed_and_moved(tmp_path: Path) -> None:
    store = tmp_path / "corpus"
    first = Campaign(CampaignOptions(targets=("fake-raise",), corpus_dir=store, max_samples=1,
                                     replay=False, shrink=False, workers=1)).run()
    (found,) = first.new_buckets
    stored = store / found.bucket
    fixed, moved = "compile_error-000000000001", "crash-000000000002"
    shutil.copytree(stored, store / fixed)
    _rewrite(store / fixed, bucket=fixed, target="fake-ok")  # the "toolchain" got fixed
    shutil.copytree(stored, store / moved)
    _rewrite(store / moved, bucket=moved, verdict="CRASH")  # fails today, but elsewhere
    report = Campaign(CampaignOptions(targets=("fake-raise",), corpus_dir=store, max_samples=0,
                                      shrink=False, workers=1)).run()
    status = {r.bucket: (r.status, r.now) for r in report.replays}
    assert status == {found.bucket: ("still-failing", (found.bucket,)),
                      fixed: ("fixed", ()),
                      moved: ("moved", (found.bucket,))}
    assert report.phase_seconds["replay"] > 0 and report.samples == 0


def _triage(sample: Sample, names: list[str], pool: WorkerPool) -> list:  # type: ignore[type-arg]
    targets = {t.name: t for t in resolve_targets(names)}
    reference, eager = resolve_targets([REFERENCE, EAGER])
    answers = pool.run([(reference, sample), (eager, sample), *((t, sample) for t in targets.values())])
    results = dict(zip(targets, answers[2:]))
    triage = Triage(pool, Tolerance())
    outcomes = triage.outcomes(results, answers[0], answers[1])
    return triage.findings(sample, targets, results, outcomes)


@pytest.mark.engine
def test_fakes_wrong_in_different_ops_never_share_a_bucket() -> None:
    sample = tiny_sample(tiny_config(sigmoid_top=0))
    with WorkerPool(2, timeout_s=120) as pool:
        findings = _triage(sample, ["fake-wrong-bmm", "fake-wrong-relu", "fake-ok"], pool)
    by_target = {f.target: f for f in findings}
    assert sorted(by_target) == ["fake-wrong-bmm", "fake-wrong-relu"]
    assert by_target["fake-wrong-bmm"].culprit == "op:aten.bmm.default"
    assert by_target["fake-wrong-relu"].culprit == "op:aten.relu.default"
    assert by_target["fake-wrong-bmm"].bucket != by_target["fake-wrong-relu"].bucket
    assert all(f.verdict is Verdict.MISMATCH for f in findings)


POOLED_CULPRIT = "op:aten.embedding_bag.padding_idx[per_sample_weights]"
LINALG = "torch-mlir:linalg-on-tensors"


def _big_pooled_sample(index_dtype: str = "int64") -> Sample:
    """Three tables (two QR), cat interaction, a sigmoid, the clamp, learned
    pooling weights, two batches of four examples: much to shrink away."""
    config = tiny_config(weighted_pooling="learned", qr_flag=True, qr_threshold=15,
                         arch_interaction_op="cat", ln_top=(16, 3, 1), sigmoid_top=1,
                         loss_threshold=0.01, index_dtype=index_dtype)
    rng = np.random.default_rng(5)
    dtype = np.dtype(index_dtype)
    batches = []
    for _ in range(2):
        offsets = tuple(np.array([0, 2, 3, 5], dtype) for _ in config.ln_emb)
        indices = tuple(rng.integers(0, rows, 7).astype(dtype) for rows in config.ln_emb)
        batches.append(Batch(rng.standard_normal((4, 3)).astype(np.float32), offsets, indices))
    return Sample(config, 12345, tuple(batches))


@pytest.mark.pipeline
def test_real_int32_and_weighted_pooling_bugs_get_two_buckets() -> None:
    names = ["refbackend", "iree-cpu", "iree-torch"]
    with WorkerPool(2, timeout_s=300) as pool:
        int32 = _triage(_big_pooled_sample("int32"), names, pool)
        pooled = _triage(_big_pooled_sample("int64"), names, pool)
    (lowering,) = int32  # one bug, one bucket: iree-torch's compile error joins it
    (mismatch,) = pooled
    assert lowering.verdict is Verdict.LOWERING_INVALID_IR and lowering.owner == LINALG
    assert set(lowering.targets) == set(names)
    assert mismatch.verdict is Verdict.MISMATCH and mismatch.culprit == POOLED_CULPRIT
    assert mismatch.owner == LINALG and set(mismatch.targets) == set(names)
    assert lowering.bucket != mismatch.bucket


@pytest.mark.slow
@pytest.mark.pipeline
def test_shrinking_keeps_the_bucket_and_ends_minimal(tmp_path: Path) -> None:
    """A stored, unshrunk weighted-pooling case (real torch-mlir bug) is
    replayed, shrunk on refbackend within its bucket, and swapped in; a later
    replay finds the shrunk case in the same bucket."""
    store = tmp_path / "corpus"
    big = _big_pooled_sample()
    bucket = bucket_for(Verdict.MISMATCH, mismatch_key(LINALG, POOLED_CULPRIT))
    corpus.save(store, corpus.CorpusEntry(
        bucket=bucket, signature=mismatch_key(LINALG, POOLED_CULPRIT), verdict=Verdict.MISMATCH,
        owner=LINALG, target="refbackend", sample=big, culprit=POOLED_CULPRIT,
        seen_on=("iree-cpu", "refbackend")))
    options = CampaignOptions(targets=("refbackend", "iree-cpu"), corpus_dir=store, max_samples=0,
                              budget_s=600, shrink_budget_s=120, workers=2,
                              cache_dir=tmp_path / "cache")
    report = Campaign(options).run()
    assert [(r.bucket, r.status) for r in report.replays] == [(bucket, "still-failing")]
    (shrunk,) = report.shrinks
    assert shrunk.replaced, shrunk.record
    (entry,) = corpus.load(store)[0]
    assert entry.bucket == bucket and entry.shrink is not None
    size = entry.shrink["size_after"]
    assert (size["tables"], size["examples"], size["indices"], size["batches"]) == (1, 1, 1, 1)
    assert entry.shrink["size_before"]["tables"] == 3
    config = entry.sample.config
    assert config.weighted_pooling is not None  # the bug's feature stays on
    assert not config.qr_flag and config.loss_threshold == 0.0  # unrelated features off
    assert (config.arch_interaction_op, config.sigmoid_top) == ("dot", -1)
    assert entry.sample.batches[0].bag_lengths(0).tolist() == [1]
    again = Campaign(CampaignOptions(targets=("refbackend", "iree-cpu"), corpus_dir=store,
                                     max_samples=0, shrink=False, workers=2,
                                     cache_dir=tmp_path / "cache")).run()
    assert [(r.bucket, r.status) for r in again.replays] == [(bucket, "still-failing")]
    # The report phase wrote a checked, standalone single-op reproducer and the report.
    assert report.repro_status == {bucket: "reproduces"}
    assert entry.path is not None
    stored = corpus.load_entry(entry.path)
    assert stored.repro_status == "reproduces" and stored.repro["kind"] == "single-op"
    # Short enough to paste: the op, its inputs, the judge and the exit-code guard.
    assert len((entry.path / "repro.py").read_text().splitlines()) <= 60
    text = (entry.path / "REPORT.md").read_text()
    assert "**torch-mlir** (llvm/torch-mlir)" in text and "iree-run-module" in text



def test_eager_float32_failing_alone_is_pytorchs() -> None:
    """The float64 reference ran, eager float32 raised: a finding owned by
    PyTorch, and the compiled targets are still judged (against float64)."""
    from oracles import Failure, Stage, TargetResult

    reference = TargetResult(REFERENCE, [np.array([[0.25]])])
    eager = TargetResult(EAGER, [None], Failure(Stage.RUN, "RuntimeError", "error: boom"))
    results = {"fake-ok": TargetResult("fake-ok", [np.array([[0.25]], np.float32)])}
    triage = Triage(None, Tolerance())  # type: ignore[arg-type]  # no mismatch: no pool needed
    outcomes = triage.outcomes(results, reference, eager)
    assert outcomes["fake-ok"].verdict is Verdict.PASS
    targets = {"fake-ok": resolve_targets(["fake-ok"])[0], EAGER: resolve_targets([EAGER])[0]}
    (finding,) = triage.findings(tiny_sample(), targets, {**results, EAGER: eager}, outcomes)
    assert finding.owner == "pytorch:eager" and finding.verdict is Verdict.RUNTIME_ERROR


def test_a_case_shrunk_again_keeps_its_first_size_and_sums_the_work() -> None:
    from fuzz.engine.bucketshrink import _merged

    first = {"size_before": {"tables": 3}, "size_after": {"tables": 2}, "steps_tried": 10,
             "steps_accepted": 4, "seconds": 30.0, "stopped": "budget",
             "by_pass": {"tables": [6, 3, 20.0], "knobs": [4, 1, 10.0]}}
    again = {"size_before": {"tables": 2}, "size_after": {"tables": 1}, "steps_tried": 5,
             "steps_accepted": 1, "seconds": 12.5, "stopped": "fixpoint",
             "by_pass": {"knobs": [2, 1, 5.0], "mlps": [3, 0, 7.5]}}
    merged = _merged(first, again)
    assert merged["size_before"] == {"tables": 3} and merged["size_after"] == {"tables": 1}
    assert (merged["steps_tried"], merged["steps_accepted"], merged["seconds"]) == (15, 5, 42.5)
    assert merged["stopped"] == "fixpoint" and merged["passes"] == 2
    assert merged["by_pass"] == {"tables": [6, 3, 20.0], "knobs": [6, 2, 15.0],
                                 "mlps": [3, 0, 7.5]}
    assert _merged(None, again) == again


def _file_samples(store: Path, samples: list[Sample], report: bool) -> Campaign:
    """Check and file ``samples`` on refbackend as generated samples would be,
    then (``report``) run the report phase; the campaign afterwards."""
    campaign = Campaign(CampaignOptions(targets=("refbackend",), corpus_dir=store, workers=1,
                                        replay=False, shrink=False))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        for sample in samples:
            file_as_generated(campaign, sample)
        if report:
            campaign.bugs.write_reports()
    return campaign


@pytest.mark.pipeline
@pytest.mark.slow
def test_a_stored_case_replaced_by_a_smaller_one_gets_its_repro_again(tmp_path: Path) -> None:
    """The real int32 lowering bug, stored from a 3-table case without its
    report files; a later campaign meets it in a 1-table case, swaps that in,
    and its report phase writes repro.py and REPORT.md for it (they were lost:
    only case.json, error.txt and inputs.npz stayed)."""
    store = tmp_path / "corpus"
    first = _file_samples(store, [tiny_sample(tiny_config(index_dtype="int32"))], report=False)
    (bucket,) = [f.bucket for f in first.report.new_buckets]
    assert not (store / bucket / "repro.py").exists()
    one_table = tiny_config(index_dtype="int32", ln_emb=(10,), ln_top=(5, 1))
    later = _file_samples(store, [tiny_sample(one_table)], report=True)
    assert not later.report.new_buckets and bucket in later.report.repro_status
    (entry,) = corpus.load(store)[0]
    assert entry.sample.config.num_tables == 1
    assert (store / bucket / "repro.py").exists() and (store / bucket / "REPORT.md").exists()


@pytest.mark.engine
def test_a_shrink_candidate_that_hits_a_bug_of_ours_is_a_rejected_step(tmp_path: Path) -> None:
    """Seed 5's campaign died in its shrink phase on a candidate whose export
    guard failed inside localization (a bug of ours, raised as a HarnessError):
    now such a candidate is a rejected step, counted in the shrink record, and
    shrinking carries on with the others and still swaps in a smaller case."""
    from fuzz.workers.execute import execute
    from fuzz.workers.pool import HarnessFault

    class InProcessPool:
        """Runs (target, sample) jobs here; the target's job on a candidate
        with one table "hits a bug of ours" the way the export guard did."""

        slots = free_slots = 1  # the Pool interface: how many jobs run (could start) at once
        calls: Counter[str] = Counter()

        def run(self, jobs: list, faults: bool = False) -> list:  # type: ignore[type-arg]
            answers = []
            for target, sample in jobs:
                self.calls[target.name] += 1
                if target.name == "fake-raise" and sample.config.num_tables == 1:
                    assert faults, "a candidate's fault must not raise out of the pool"
                    answers.append(HarnessFault(target.name,
                                                "Traceback ...\nAssertionError: Guard failed"))
                else:
                    answers.append(execute(target, sample))
            return answers

    campaign = Campaign(CampaignOptions(targets=("fake-raise",), corpus_dir=tmp_path / "corpus",
                                        workers=1))
    with campaign.session.open_pool() as pool:  # filed as a generated sample would be
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample())
    in_process = InProcessPool()
    campaign.session.pool = in_process
    campaign.session.triage = Triage(in_process, campaign.options.tolerance)  # type: ignore[arg-type]
    record = campaign.bugs.shrink_one(found.bucket, budget_s=60)
    assert record.record["steps_rejected"] > 0
    assert "AssertionError: Guard failed" in record.record["rejections"][0]
    # An error bucket's step runs the target's job alone, and the references
    # only for a candidate that kept the error (plus the first and last check).
    pool = campaign.session.pool
    assert pool.calls["fake-raise"] == record.record["steps_tried"] + 2
    assert pool.calls["eager-f64"] == pool.calls["eager"] == record.record["steps_accepted"] + 2
    # Every cut to one table was rejected (the skeletons first), so two stay;
    # the rest still shrank.
    after = record.record["size_after"]
    assert record.replaced and after["tables"] == 2 and after["examples"] == 1
    # A later turn starts from the key the first one checked (the stored case
    # is not run again) and takes the keys of candidates the first one judged
    # from it: at the first turn's fixpoint it runs no job at all.
    pool.calls.clear()
    again = campaign.bugs.shrink_one(found.bucket, budget_s=60)
    assert again.record["steps_tried"] > record.record["steps_tried"]
    assert pool.calls["fake-raise"] == 0 and not again.replaced
    assert record.record["stopped"] == "fixpoint"


@pytest.mark.engine
def test_buckets_stored_from_one_sample_each_hold_their_own_targets_key(tmp_path: Path) -> None:
    """One sample is often stored in several buckets, one per target: each
    bucket's shrink holds the key its own target gives (a key remembered by
    the sample's content alone gave the second bucket the first one's key,
    and none of its steps could be accepted)."""
    import shutil

    campaign = Campaign(CampaignOptions(targets=("fake-raise",), corpus_dir=tmp_path / "corpus",
                                        workers=1))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample())
    twin = tmp_path / "corpus" / "runtime_error-0123456789ab"
    shutil.copytree(tmp_path / "corpus" / found.bucket, twin)
    case = json.loads((twin / "case.json").read_text())
    case["target"] = "fake-ok"
    (twin / "case.json").write_text(json.dumps(case))

    asked: list[str] = []

    class Keys:
        """A triage whose every sample fails each target in a way of its own."""

        def solo_key(self, target, sample, method):  # type: ignore[no-untyped-def]
            asked.append(target.name)
            return f"RUNTIME_ERROR|{target.name}"

        def solo_error_keys(self, target, samples):  # type: ignore[no-untyped-def]
            return [None for _ in samples]

    campaign.session.triage = Keys()  # type: ignore[assignment]
    campaign.session.pool = None
    campaign.bugs.shrink_one(found.bucket, budget_s=5)
    campaign.bugs.shrink_one(twin.name, budget_s=5)
    assert asked == ["fake-raise", "fake-ok"]
    campaign.bugs.shrink_one(twin.name, budget_s=5)  # its own key, remembered
    assert asked == ["fake-raise", "fake-ok"]
    # No step held: the case stays, but its record says so (a fixpoint, two
    # passes), so replay does not queue it as cut short.
    record = corpus.load_entry(twin).shrink
    assert record is not None and (record["stopped"], record["passes"]) == ("fixpoint", 2)


@pytest.mark.pipeline
def test_a_failure_of_torch_mlirs_shared_prefix_is_the_prefixs_whichever_targets_ran() -> None:
    """The real 4-bit quantized-bag failure happens in torch-mlir's shared
    prefix (the Torch Backend contract): refbackend alone files it as the
    prefix's, in the same bucket as a run with the ``torch`` output type
    beside it (it was lowering_unsupported_op-7379a7c81a19 on linalg alone
    and -e3efb243e1e0 with iree-torch)."""
    sample = tiny_sample(tiny_config(ln_emb=(10,), m_spa=4, quantize_bits=4,
                                     ln_top=(5, 1)))
    buckets = []
    for targets in (("refbackend",), ("refbackend", "iree-torch")):
        campaign = Campaign(CampaignOptions(targets=targets, workers=1, replay=False,
                                            shrink=False))
        (found,) = campaign.check_samples([sample])[0]
        assert found.owner == "torch-mlir:torch" and found.verdict is \
            Verdict.LOWERING_UNSUPPORTED_OP, found
        buckets.append(found.bucket)
    assert buckets[0] == buckets[1]


@pytest.mark.pipeline
@pytest.mark.slow
def test_a_wrong_answer_gets_one_bucket_whichever_backends_ran() -> None:
    """The real weighted-pooling wrong answer (torch-mlir's linalg lowering
    drops the per-sample weights) seen on IREE llvm-cpu alone is blamed as
    it is with refbackend beside it: the campaign runs a witness backend of
    the same lowering (without one it was blamed on iree:llvm-cpu, another
    bucket). The witness's own findings are not filed."""
    sample = _big_pooled_sample("int64")
    found = {}
    for targets in (("iree-cpu",), ("iree-cpu", "refbackend")):
        campaign = Campaign(CampaignOptions(targets=targets, workers=2, replay=False,
                                            shrink=False, timeout_s=300))
        (found[targets],) = campaign.check_samples([sample])[0]
        assert found[targets].verdict is Verdict.MISMATCH and found[targets].owner == LINALG
        assert campaign.report.witness_runs == (1 if targets == ("iree-cpu",) else 0)
    alone, beside = found.values()
    assert alone.bucket == beside.bucket and alone.culprit == beside.culprit == POOLED_CULPRIT
    assert "iree-cpu" in alone.targets and len(alone.targets) == 2


@pytest.mark.engine
def test_new_buckets_are_shrunk_and_reported_while_generation_goes_on(tmp_path: Path) -> None:
    """Shrinking runs beside generation inside the budget (no shrink phase
    after it); what is left after the budget is bounded by ``finish_s``; the
    summary's actionable line names every bucket that is not a bug report yet."""
    store = tmp_path / "corpus"
    report = Campaign(CampaignOptions(targets=("fake-raise",), corpus_dir=store, budget_s=25,
                                      seed=3, replay=False, workers=2, finish_s=10)).run()
    (finding,) = report.new_buckets
    assert set(report.phase_seconds) == {"generate", "finish"}
    assert report.phase_seconds["finish"] < 10 + 2
    (record,) = report.shrinks
    assert record.bucket == finding.bucket and record.record["stopped"] == "fixpoint"
    assert 0 < report.shrink_s < report.phase_seconds["generate"]
    # Generation went on after the bucket was shrunk (samples after its discovery).
    assert report.samples > finding.sample_index + 1
    entry = corpus.load_entry(store / finding.bucket)
    assert entry.shrink is not None and entry.shrink["stopped"] == "fixpoint"
    ready, unconfirmed = report.actionable()
    assert ready == [] and unconfirmed == {finding.bucket: "repro: not written: FAKE target"}
    assert report.summary()["actionable"] == {"ready": 0, "buckets": 1,
                                              "unconfirmed": unconfirmed}


@pytest.mark.engine
def test_a_wrong_answer_that_changes_between_runs_is_flaky_not_a_mismatch(tmp_path: Path) -> None:
    """A nondeterministic fake (a different wrong answer on every call) is run
    again before its bucket is stored and filed as FLAKY with the spread of
    outputs seen; a deterministic wrong answer stays a MISMATCH."""
    found = {}
    for name in ("fake-flaky", "fake-wrong-relu"):
        campaign = Campaign(CampaignOptions(targets=(name,), corpus_dir=tmp_path / name,
                                            workers=1, replay=False, shrink=False,
                                            report=False))
        with campaign.session.open_pool() as pool:
            campaign.session.attach(pool)
            (found[name],) = file_as_generated(campaign, tiny_sample())
        assert campaign.report.confirm_reruns == 1
    flaky, wrong = found["fake-flaky"], found["fake-wrong-relu"]
    assert flaky.verdict is Verdict.FLAKY and flaky.bucket.startswith("flaky-")
    assert flaky.outcome.numbers["runs"] == 2 and flaky.outcome.numbers["spread"] > 0
    entry = corpus.load_entry(tmp_path / "fake-flaky" / flaky.bucket)
    assert entry.verdict is Verdict.FLAKY and "two runs of one program disagreed" in entry.detail
    assert wrong.verdict is Verdict.MISMATCH and wrong.bucket.startswith("mismatch-")


class _ReportPool:
    """Two slots; records the bucket of each report job submitted, runs none."""
    slots = 2

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, job, after=None, urgent=False) -> int:  # type: ignore[no-untyped-def]
        self.submitted.append(job.folder.rsplit("/", 1)[-1])
        return len(self.submitted)


def test_the_end_of_the_budget_is_kept_for_the_reports(tmp_path: Path) -> None:
    """When the time left before the end of the finish phase is what the
    unwritten reports need, shrinking stops and every bucket still waiting
    for it is reported as it is, so the campaign ends with a repro for each
    (not a queue of reports after it)."""
    campaign = Campaign(CampaignOptions(corpus_dir=tmp_path / "corpus", targets=("fake-ok",)))
    campaign.session.pool = _ReportPool()  # type: ignore[assignment]
    buckets = [f"compile_error-00000000000{i}" for i in range(4)]
    campaign.bugs.unshrunk = list(buckets)
    campaign.bugs.needs_report.update(buckets)
    # Reports measured at 13 s each in this campaign: 4 x 13 s / 2 workers =
    # 26 s of the 20 s left before the end of the finish phase, so no shrink
    # turn starts, whatever generation's deadline.
    campaign.report.report_costs = {"x": [12.0], "y": [14.0]}
    campaign.bugs.finish_by = time.monotonic() + 20
    campaign.bugs.work(deadline=time.monotonic() + 5)
    assert campaign.bugs.unshrunk == [] and sorted(campaign.session.pool.submitted) == buckets
    assert {r.bucket: r.record for r in campaign.report.shrinks} == {
        b: {"skipped": "budget kept for the reports"} for b in buckets}


def test_a_bucket_stopped_on_its_budget_shrinks_on_while_no_other_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket whose --shrink-budget runs out is reported as it is, then gets
    more turns only once no bucket waits for its first budget, only while a
    turn of the shrink share stays free, never in the finish phase, and at
    most ``_OVERTIME_FACTOR`` budgets in all; a smaller case found then is
    reported again."""
    import types

    from fuzz.engine import bugwork
    from fuzz.engine.records import ShrinkRecord

    clock = types.SimpleNamespace(now=1000.0)
    monkeypatch.setattr(bugwork, "time", types.SimpleNamespace(monotonic=lambda: clock.now))

    campaign = Campaign(CampaignOptions(corpus_dir=tmp_path / "corpus", targets=("fake-ok",),
                                        shrink_budget_s=40.0))
    bugs, pool = campaign.bugs, _ReportPool()
    campaign.session.pool = pool  # type: ignore[assignment]
    slow, quick = "compile_error-00000000000a", "lowering_error-00000000000b"
    turns: list[tuple[str, float]] = []

    def shrink_one(bucket: str, budget_s: float) -> ShrinkRecord:
        turns.append((bucket, budget_s))
        clock.now += budget_s
        # The slow bucket ends smaller and at its fixpoint on its sixth turn (120 s).
        done = bucket == quick or turns.count((slow, 20.0)) == 6
        return ShrinkRecord(bucket, "t", {"stopped": "fixpoint" if done else "budget"},
                            replaced=bucket == slow and done)

    bugs.shrink_one = shrink_one  # type: ignore[method-assign]
    bugs.generating_since = clock.now - 1000  # room in the share for every turn below
    bugs.unshrunk = [slow]
    bugs.needs_report.add(slow)
    bugs.work(deadline=clock.now + 44)
    # Its budget (two turns of 20 s) is spent and it is reported as it is;
    # the deadline leaves no room for a third turn.
    assert turns == [(slow, 20.0), (slow, 20.0)] and bugs.overtime == [slow]
    assert pool.submitted == [slow]
    bugs.report_jobs.clear()  # its report is in
    bugs.needs_report.discard(slow)
    bugs.unshrunk = [quick]
    bugs.needs_report.add(quick)
    bugs.finish_by = clock.now + 10_000
    bugs.work(deadline=clock.now + 82)
    # The new bucket first; then the slow one on, in overtime, until the
    # deadline; turns that found nothing smaller write no report again.
    assert [b for b, _ in turns[2:]] == [quick, slow, slow, slow] and bugs.overtime == [slow]
    assert pool.submitted == [slow, quick]
    # The smaller case found in overtime is reported again; its fixpoint ends the overtime.
    bugs.work(deadline=clock.now + 1000)
    assert turns[6:] == [(slow, 20.0)] and bugs.overtime == []
    assert pool.submitted == [slow, quick, slow]
    assert {r.bucket: r.record["stopped"] for r in campaign.report.shrinks} == {
        slow: "fixpoint", quick: "fixpoint"}
    # Never in the finish phase, never without a free turn of the share, never past its cap.
    bugs.overtime = [slow]
    bugs.work(deadline=clock.now + 1000, share=None)
    bugs.generating_since, campaign.report.shrink_s = clock.now - 100, 10.0  # 30 s of share free
    bugs.work(deadline=clock.now + 1000)
    assert len(turns) == 7 and bugs.overtime == [slow]
    bugs.generating_since = clock.now - 10_000
    bugs._shrink_spent[slow] = 4 * 40.0 - 4
    bugs.work(deadline=clock.now + 1000)
    assert len(turns) == 7 and bugs.overtime == [] and pool.submitted == [slow, quick, slow]


def test_the_room_kept_for_reports_follows_what_reports_cost_here(tmp_path: Path) -> None:
    """Before any report job has answered the reserve uses the estimate;
    after, the mean of the report jobs this campaign has measured."""
    from fuzz.engine.bugwork import _REPORT_S

    class Pool:
        slots = 2

    campaign = Campaign(CampaignOptions(corpus_dir=tmp_path / "corpus", targets=("fake-ok",)))
    campaign.session.pool = Pool()  # type: ignore[assignment]
    campaign.bugs.unshrunk = ["a", "b"]
    campaign.bugs.needs_report.update({"b", "c", "d"})
    assert campaign.bugs.reserve_s() == pytest.approx(4 * _REPORT_S / 2)
    campaign.report.report_costs = {"b": [4.0, 6.0]}
    assert campaign.bugs.reserve_s() == pytest.approx(4 * 5.0 / 2)


def test_the_summary_says_what_the_report_jobs_cost() -> None:
    """With the shrink seconds, the report jobs' worker seconds are what the
    bug work took from the samples: both in --summary-json and the table."""
    import io

    from rich.console import Console

    from fuzz.cli.summary import _summary
    from fuzz.engine.records import CampaignReport

    report = CampaignReport(shrink_s=12.5, report_costs={"a": [1.0, 2.0], "b": [4.5]})
    report.phase_seconds["generate"] = 60.0
    assert report.summary()["report_jobs"] == {"answered": 3, "worker_s": 7.5, "by_bucket": {
        "a": [1.0, 2.0], "b": [4.5]}}
    out = io.StringIO()
    _summary(Console(file=out, width=400), report)
    assert "generate 60.0s (of which shrinking 12.5s); 3 report jobs, 7.5 worker-s" in out.getvalue()


@pytest.mark.engine
def test_jobs_not_started_when_the_budget_ends_are_dropped(tmp_path: Path) -> None:
    """At the deadline the generated samples' queued jobs are dropped; a
    sample is judged on the targets that answered: a new error is filed (its
    bucket does not depend on which targets ran), a new wrong answer seen on
    part of the targets is noted, not filed; a sample whose references were
    dropped is not judged at all."""
    from fuzz.engine.campaign import dispatch_order

    targets = ("fake-raise", "fake-wrong-relu", "fake-ok", "fake-wrong-bmm")
    campaign = Campaign(CampaignOptions(targets=targets, corpus_dir=tmp_path / "corpus",
                                        workers=1, replay=False, shrink=False, report=False))
    assert [t.name for t in dispatch_order(campaign.targets)] == list(targets)
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        first = campaign.session.submit(tiny_sample(), campaign.targets, index=1)
        # One worker: the references, fake-raise and fake-wrong-relu answer,
        # fake-ok runs, fake-wrong-bmm waits ...
        while first.left > 2:
            campaign.session.take_answers()
        second = campaign.session.submit(tiny_sample(seed=8), campaign.targets, index=2)
        # ... and so do the second sample's six jobs.
        campaign.session.cut_queued()
        assert campaign.report.cut_jobs == 7 and first.cut and second.cut
        while campaign.session.waiting:
            campaign.generate.drain()
    report = campaign.report
    assert report.cut_samples == 1  # the second: its references never ran
    assert [f.target for f in report.findings] == ["fake-raise"]
    assert report.findings[0].verdict is Verdict.COMPILE_ERROR
    assert (tmp_path / "corpus" / report.findings[0].bucket / "case.json").exists()
    (unfiled,) = report.cut_unfiled
    assert "new wrong answer on fake-wrong-relu" in unfiled
    assert not list((tmp_path / "corpus").glob("mismatch-*"))
    assert report.outcomes[("fake-ok", "PASS")] == 1
    assert not [key for key in report.outcomes if key[0] == "fake-wrong-bmm"]


@pytest.mark.engine
def test_an_op_level_bucket_reproducing_as_one_op_is_minimal_without_shrinking(
        tmp_path: Path) -> None:
    """A new wrong answer localized to an op is reported first; when its
    single-op repro reproduces, that is the bucket's minimal case (recorded
    as its shrink, actionable); when the report falls back to the model
    form, the bucket goes to shrinking."""
    campaign = Campaign(CampaignOptions(targets=("fake-wrong-relu",), corpus_dir=tmp_path / "c",
                                        workers=1, replay=False))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample(batches=2))
        assert found.culprit == "op:aten.relu.default" and found.new
        assert campaign.bugs.op_first == {found.bucket} and campaign.bugs.unshrunk == []
        campaign.bugs.after_single_op(found.bucket, {"repro": {"kind": "single-op"}}, "reproduces")
        # A smaller generated case does not replace it: the repro is the op,
        # and a new report would find the same op again.
        before = content_hash(corpus.load_entry(tmp_path / "c" / found.bucket).sample)
        campaign.bugs.op_first.clear()
        (again,) = file_as_generated(campaign, tiny_sample())
    assert again.bucket == found.bucket and not again.new and campaign.ledger.one_op == {found.bucket}
    stored = corpus.load_entry(tmp_path / "c" / found.bucket)
    assert content_hash(stored.sample) == before and stored.shrink["stopped"] == "single-op"
    assert campaign.bugs.op_first == set() and campaign.bugs.unshrunk == []
    (record,) = campaign.report.shrinks
    assert record.record["stopped"] == "single-op" and record.record["op"] == found.culprit
    assert corpus.load_entry(tmp_path / "c" / found.bucket).shrink["stopped"] == "single-op"
    campaign.report.repro_status[found.bucket] = "reproduces"  # its one-op report's answer
    assert campaign.report.actionable() == ([found.bucket], {})
    campaign.bugs.needs_report.discard(found.bucket)
    campaign.bugs.after_single_op(found.bucket, {"repro": {"kind": "model"}}, "reproduces")
    assert campaign.bugs.unshrunk == [found.bucket]
    assert found.bucket in campaign.bugs.needs_report  # the shrunk case gets the full report
    assert campaign.bugs.searched == set()  # no op search ran: the next report may search
    # A first report that searched the model for one failing op and found
    # none: the report after shrinking does not search again.
    campaign.bugs.after_single_op(found.bucket, {"repro": {"kind": "backend"}},
                                  "does not reproduce: no op of the model alone fails so")
    assert campaign.bugs.searched == {found.bucket}
    submitted: list = []  # type: ignore[type-arg]
    pool = campaign.bugs.pool
    assert pool is not None
    pool.submit = lambda job, after=None, urgent=False: submitted.append(job) or len(submitted)  # type: ignore[method-assign]
    campaign.bugs.ready_for_report(found.bucket)
    campaign.bugs.queue_reports()
    assert [(job.searched, job.one_op_only) for job in submitted] == [(True, False)]


@pytest.mark.engine
@pytest.mark.parametrize("room_s, shrunk", [(0.5, False), (120.0, True)])
def test_a_bucket_sent_to_shrinking_while_the_campaign_finishes_gets_a_shrink_record(
        tmp_path: Path, room_s: float, shrunk: bool) -> None:
    """An op-level bucket whose one-op report comes in during the finish phase
    and does not reproduce as one op goes to shrinking then: shrunk when the
    finish has room, else labelled "budget spent", never left without a row."""
    campaign = Campaign(CampaignOptions(targets=("fake-wrong-relu",), corpus_dir=tmp_path / "c",
                                        workers=1, replay=False))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample(batches=2))
        campaign.bugs.to_report.clear()
        campaign.bugs.report_jobs = {-1: found.bucket}  # its one-op report, in flight

        answered: list[str] = []

        def report_comes_in(timeout: float) -> None:
            campaign.bugs.report_jobs.clear()
            if answered:  # the shrunk case's full report: written
                return
            answered.append(found.bucket)
            campaign.bugs.needs_report.discard(found.bucket)
            campaign.bugs.after_single_op(found.bucket, {"repro": {"kind": "model"}}, "reproduces")

        campaign.bugs.take_answers = report_comes_in
        campaign.bugs.finish(until=time.monotonic() + room_s)
    (record,) = campaign.report.shrinks
    assert campaign.bugs.unshrunk == []
    if shrunk:
        assert record.record["stopped"] == "fixpoint", record.record
    else:
        assert record.record == {"skipped": "budget spent"}


@pytest.mark.engine
@pytest.mark.parametrize("replayed", [Observed.MOVED, Observed.STILL_FAILING])
def test_a_shrunk_wrong_answer_named_by_features_replaces_the_case_only_if_it_replays_in_its_bucket(
        tmp_path: Path, replayed: Observed) -> None:
    """The reducer holds "a wrong answer on this target" for a culprit that
    feature ablation named, not the features: before a smaller case replaces
    the stored one it is replayed as replay will (seed 73: a shrunk bfloat16
    QR case replayed "moved"); one that moves leaves the stored case as it
    was, its shrink record saying where the smaller case went."""
    from fuzz.triage.edits import content_hash

    campaign = Campaign(CampaignOptions(targets=("fake-wrong-relu",), corpus_dir=tmp_path / "corpus",
                                        workers=1, replay=False, report=False))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample())
        folder = tmp_path / "corpus" / found.bucket
        stored = corpus.load_entry(folder)
        corpus.update_case(folder.parent, found.bucket, culprit="features:relu")
        seen: list[str] = []

        def replay(entry: corpus.CorpusEntry) -> ReplayRecord:
            seen.append(entry.bucket)
            return ReplayRecord(entry.bucket, entry.target, replayed, ("mismatch-000000000000",))

        campaign.bugs.shrinker.replay = replay
        record = campaign.bugs.shrink_one(found.bucket, budget_s=60)
    after = corpus.load_entry(folder)
    assert seen == [found.bucket]
    if replayed is Observed.MOVED:
        assert not record.replaced and record.record["stopped"] == "moved"
        assert record.record["moved_to"] == ["mismatch-000000000000"]
        assert content_hash(after.sample) == content_hash(stored.sample)
    else:
        assert record.replaced and content_hash(after.sample) != content_hash(stored.sample)


@pytest.mark.engine
def test_a_wrong_answers_shrink_steps_run_side_by_side_and_keep_its_bucket(tmp_path: Path) -> None:
    """A wrong answer's candidates are judged two at a time on two workers
    (``Triage.solo_keys``), as an error's are: the shrink reaches its fixpoint,
    and the smaller stored case still gives the bucket's own key."""
    campaign = Campaign(CampaignOptions(targets=("fake-wrong-relu",), corpus_dir=tmp_path / "c",
                                        workers=2, replay=False, report=False))
    widths: list[int] = []
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample(batches=2))
        triage = campaign.session.triage
        assert triage is not None and found.culprit == "op:aten.relu.default"
        solo_keys = triage.solo_keys

        def spied(target, samples, method):  # type: ignore[no-untyped-def]
            widths.append(len(samples))
            return solo_keys(target, samples, method)

        triage.solo_keys = spied  # type: ignore[method-assign]
        record = campaign.bugs.shrink_one(found.bucket, budget_s=120)
        stored = corpus.load_entry(tmp_path / "c" / found.bucket)
        again = solo_keys(resolve_targets(["fake-wrong-relu"])[0], [stored.sample], "op")
    assert record.record["stopped"] == "fixpoint" and record.replaced, record.record
    assert widths[0] == 1 and max(widths) == 2  # the stored case's key, then pairs
    assert again == [mismatch_key("fake-wrong-relu", "op:aten.relu.default")]
    assert stored.sample.config.num_tables == 1 and len(stored.sample.batches) == 1


@pytest.mark.engine
def test_a_wrong_answer_on_batch_0_that_localization_cannot_see_is_localized_once() -> None:
    """A shrink step's key for a wrong answer localization cannot see (the
    shy fake answers right with its intermediates exposed): localization on
    batch 0 runs once, and its answer serves the wrong answer seen on batch 0
    (it was compiled a second time, the same job)."""
    from fuzz.triage.findings import LocalizeJob

    shy = resolve_targets(["fake-shy-wrong-relu"])[0]
    with WorkerPool(1, timeout_s=120) as pool:
        triage = Triage(pool, Tolerance())
        run = pool.run
        localized: list[int] = []

        def counting(jobs, faults=False):  # type: ignore[no-untyped-def]
            localized.extend(job.batch for job in jobs if isinstance(job, LocalizeJob))
            return run(jobs, faults=faults)

        pool.run = counting  # type: ignore[method-assign]
        keys = triage.solo_keys(shy, [tiny_sample()], "op")
    assert keys == [mismatch_key("fake-shy-wrong-relu", "unlocalized")]
    assert localized == [0]


def test_replay_queues_only_the_cases_whose_shrinking_was_cut_short() -> None:
    """A still-failing stored case goes back to shrinking when its shrink was
    cut short (budget) or never ran; not when it ended at a fixpoint, as one
    op, or ``moved`` (its smaller case replays elsewhere: shrinking again
    reaches the same case). Any case whose repro does not reproduce gets a
    new report."""
    import types

    from fuzz.engine.phases.replay import ReplayPhase
    from fuzz.engine.records import CampaignReport, Observed, ReplayRecord

    stopped = {"a": "fixpoint", "b": "single-op", "c": "moved", "d": "budget", "e": None}
    entries = [types.SimpleNamespace(bucket=b, target="t", shrink={"stopped": s} if s else None,
                                     repro_status="reproduces" if b != "b" else "does not reproduce")
               for b, s in stopped.items()]
    report = CampaignReport()
    session = types.SimpleNamespace(
        report=report, replay_one=lambda e: ReplayRecord(e.bucket, "t", Observed.STILL_FAILING))
    reported: list[str] = []
    bugs = types.SimpleNamespace(unshrunk=[], needs_report=set(), ready_for_report=reported.append)
    ReplayPhase(session, types.SimpleNamespace(stored=entries), bugs).run()  # type: ignore[arg-type]
    assert bugs.unshrunk == ["d", "e"]
    assert bugs.needs_report == {"b"} and reported == ["b"]


@pytest.mark.engine
def test_jobs_still_running_after_the_budget_are_not_waited_for_long(tmp_path: Path) -> None:
    """A compile running when the budget ends may take its whole job timeout
    (here a hang with a 60 s timeout): the campaign waits a quarter of the
    finish phase for it, then judges the sample without it."""
    options = CampaignOptions(targets=("fake-hang",), corpus_dir=tmp_path / "corpus", budget_s=4,
                              seed=1, replay=False, shrink=False, report=False, workers=1,
                              bug_workers=0, timeout_s=60, finish_s=8)
    report = Campaign(options).run()
    assert report.cut_running == 1
    assert report.phase_seconds["generate"] < 4 + 8 * 0.25 + 3
    assert report.summary()["cut_at_deadline"]["running"] == 1



@pytest.mark.engine
def test_a_report_still_running_at_the_end_leaves_its_case_saying_not_checked(
        tmp_path: Path) -> None:
    """A report job the campaign stops waiting for is killed with the pool,
    perhaps after it wrote repro.py and before it checked it: case.json and
    REPORT.md then say "not checked" (the next replay checks it), never the
    status of the repro that was there before."""
    from fuzz.engine.bugwork import UNCHECKED_AT_END

    campaign = Campaign(CampaignOptions(targets=("fake-wrong-relu",), corpus_dir=tmp_path / "c",
                                        workers=1, replay=False))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample())
        corpus.update_case(tmp_path / "c", found.bucket, repro_status="does not reproduce: one op")
        campaign.bugs.to_report.clear()
        campaign.bugs.unshrunk.clear()
        campaign.bugs.needs_report.discard(found.bucket)
        campaign.bugs.report_jobs = {-1: found.bucket}  # in flight, and never answered
        campaign.bugs.take_answers = lambda timeout: None
        campaign.bugs.finish(until=time.monotonic() + 0.2)
    folder = tmp_path / "c" / found.bucket
    assert corpus.load_entry(folder).repro_status == UNCHECKED_AT_END
    assert campaign.report.repro_status[found.bucket] == UNCHECKED_AT_END
    assert "one op" not in (folder / "REPORT.md").read_text()
    assert found.bucket in campaign.report.actionable()[1]


@pytest.mark.engine
def test_a_report_answer_for_a_folder_that_no_longer_loads_costs_that_report_only(
        tmp_path: Path) -> None:
    """A bucket folder that no longer loads when its report comes in (seed 97:
    a stale job's batches over a smaller case's config) is a bug of ours in
    that report: named in the harness errors, never the end of the campaign."""
    campaign = Campaign(CampaignOptions(targets=("fake-wrong-relu",), corpus_dir=tmp_path / "c",
                                        workers=1, replay=False))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        (found,) = file_as_generated(campaign, tiny_sample())
    folder = tmp_path / "c" / found.bucket
    (folder / "inputs.npz").write_bytes(tiny_sample(tiny_config(ln_bot=(2, 4, 4))).npz_bytes())
    campaign.bugs.report_answered(found.bucket, {"repro": {"status": "reproduces"}, "tools": {}})
    status = campaign.report.repro_status[found.bucket]
    assert status.startswith("cannot run: its case no longer loads"), status
    assert any(found.bucket in e for e in campaign.report.harness_errors)
