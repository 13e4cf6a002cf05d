"""A fuzzing campaign: Hypothesis draws samples, workers run them on every
target, oracles judge them, and every failure lands in the corpus once per
bucket, until the time budget is spent.

Hypothesis drives generation (seeded, so a campaign is reproducible from its
``--seed``); the time budget ends the run through an exception Hypothesis
does not treat as a test failure, so nothing is shrunk or replayed here.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, Phase, given, seed, settings

from fuzz import corpus
from fuzz.execute import TargetResult
from fuzz.sample import Sample
from fuzz.targets import EAGER, REFERENCE, TARGETS, Target, available_targets, resolve_targets
from fuzz.workers import WorkerPool
from oracles import Outcome, ReferenceFailed, Tolerance, Verdict, judge, sample_features
from oracles.signature import bucket_for, signature_key
from strategies import samples

__all__ = ["CampaignOptions", "CampaignReport", "Finding", "run_campaign"]


@dataclass(frozen=True)
class CampaignOptions:
    budget_s: float = 60.0
    seed: int = 0
    corpus_dir: Path = Path("corpus")
    # None: every target available on this machine.
    targets: tuple[str, ...] | None = None
    table: dict[str, Target] | None = None  # built-ins plus plugins; None: built-ins
    workers: int = 2
    timeout_s: float = 120.0
    memory_mb: int | None = 8192
    max_samples: int | None = None
    tolerance: Tolerance = Tolerance()
    cache_dir: Path | None = None  # None: no artifact cache
    cache_mb: int = 2048


@dataclass(frozen=True)
class Finding:
    """A failing (sample, target) and where it was filed."""

    outcome: Outcome
    bucket: str
    new: bool
    path: Path | None
    sample_index: int


@dataclass
class CampaignReport:
    targets: list[str] = field(default_factory=list)
    samples: int = 0
    configs_compiled: int = 0
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    workers_replaced: int = 0
    batches_checked: int = 0

    @property
    def new_buckets(self) -> list[Finding]:
        return [f for f in self.findings if f.new]


class _BudgetSpent(BaseException):
    """Ends Hypothesis' loop without being taken for a failing example."""


def run_campaign(options: CampaignOptions,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None,
                 on_start: Callable[[list[Target]], None] | None = None) -> CampaignReport:
    """Targets and the corpus folder are checked (and may raise) before any
    worker starts; ``on_start`` then hears which targets will run."""
    table = options.table if options.table is not None else TARGETS
    names = options.targets if options.targets is not None else available_targets(table)
    targets = resolve_targets(names, table, check_available=True)
    references = resolve_targets([REFERENCE, EAGER])
    report = CampaignReport(targets=[t.name for t in targets])
    start = time.monotonic()
    deadline = start + options.budget_s
    known = {entry.bucket for entry in corpus.load(options.corpus_dir)[0]}
    if on_start is not None:
        on_start(targets)
    with WorkerPool(options.workers, options.timeout_s, options.memory_mb,
                    cache_dir=options.cache_dir, cache_mb=options.cache_mb) as pool:
        # Worker start-up (imports) is not fuzzing time.
        deadline += time.monotonic() - start

        @settings(database=None, deadline=None, max_examples=options.max_samples or 10**9,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                  print_blob=False)
        @seed(options.seed)
        @given(samples())
        def check(sample: Sample) -> None:
            if time.monotonic() >= deadline:
                raise _BudgetSpent
            _check_sample(sample, pool, references, targets, options, report, known, on_finding)
            if options.max_samples is not None and report.samples >= options.max_samples:
                raise _BudgetSpent

        try:
            check()
        except _BudgetSpent:
            pass
        report.workers_replaced = pool.replaced
    report.elapsed_s = time.monotonic() - start
    return report


def dispatch_order(targets: list[Target]) -> list[Target]:
    """One target per lowered program first, the targets sharing it after: by
    the time a follower starts, its leader has usually put the program in the
    artifact cache, so each program is exported and lowered once per sample."""
    seen: set[str] = set()
    leaders: list[Target] = []
    followers: list[Target] = []
    for target in targets:
        (followers if target.program_group in seen else leaders).append(target)
        seen.add(target.program_group)
    return leaders + followers


def _check_sample(sample: Sample, pool: WorkerPool, references: list[Target],
                  targets: list[Target], options: CampaignOptions, report: CampaignReport,
                  known: set[str],
                  on_finding: Callable[[Finding, CampaignReport], None] | None) -> None:
    ordered = dispatch_order(targets)
    results = pool.run([(t, sample) for t in references + ordered])
    reference, eager = results[0], results[1]
    report.samples += 1
    for target, result in zip(ordered, results[2:]):
        report.configs_compiled += result.compiles
        for stage, seconds in result.timings.items():
            report.stage_seconds[stage] = report.stage_seconds.get(stage, 0.0) + seconds
        try:
            outcome = judge(result, reference, eager, options.tolerance)
        except ReferenceFailed as exc:
            report.harness_errors.append(f"sample {report.samples} ({sample.describe()}): {exc}")
            return
        report.outcomes[(target.name, outcome.verdict.value)] += 1
        report.batches_checked += sum(out is not None for out in result.outputs)
        if outcome.verdict is Verdict.PASS:
            continue
        finding = _file(outcome, result, sample, target, options, known, report.samples)
        report.findings.append(finding)
        if on_finding is not None:
            on_finding(finding, report)


def _file(outcome: Outcome, result: TargetResult, sample: Sample, target: Target,
          options: CampaignOptions, known: set[str], index: int) -> Finding:
    owner = target.owner(outcome.stage)
    key = signature_key(outcome, sample, owner)
    bucket = bucket_for(outcome.verdict, key)
    if bucket in known:
        return Finding(outcome, bucket, False, options.corpus_dir / bucket, index)
    case = dict(outcome.to_dict(), owner=owner, signature=key,
                features=sample_features(sample), campaign_seed=options.seed)
    path = corpus.save(options.corpus_dir, bucket, case, sample, result.texts, outcome.detail)
    known.add(bucket)
    return Finding(outcome, bucket, path is not None, path or options.corpus_dir / bucket, index)
