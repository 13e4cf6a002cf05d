"""Triage of one sample: from every target's raw result to findings, one per
bug, each with its bucket, owner, culprit and the targets it was seen on.

Steps: judge each target against the eager references; cluster the wrong
answers (targets on one lowering that computed the same wrong numbers); name
each cluster's culprit (first divergent op, compiled with intermediates as
outputs on one representative target; feature ablation when that fails);
blame across targets (``oracles.blame``); group by bucket. This is the only
place that turns results into bucket ids, so the campaign, replay and the
shrinker's "same bucket" test cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from fuzz.targets.cache import ArtifactCache
from fuzz.targets.pipeline import Timer
from fuzz.model.sample import Sample
from fuzz.triage.localize import UNOBSERVED, Localization, first_divergent_op
from fuzz.triage.shrink import StepRejected
from fuzz.targets.catalog import EAGER, REFERENCE, Target, resolve_targets
from fuzz.workers.interface import HarnessFault, Pool
from oracles import (Observation, Outcome, ReferenceFailed, TargetResult, Tolerance, Verdict,
                     blame, judge, reference_failed, same_wrong_answer)
from oracles.signature import error_key, mismatch_key
from fuzz.triage.ablate import ablate
from oracles import classify

__all__ = ["Finding", "vanished_under_observation", "LocalizeJob", "Triage", "CandidateRejected", "culprit_of", "stage_owner",
           "PREFERRED_REPRESENTATIVES"]

# Where to localize / shrink a bug seen on several targets: the cheapest first
# (refbackend compiles in ~0.1 s, llvm-cpu in ~1 s, Vulkan is slower).
PREFERRED_REPRESENTATIVES = ("refbackend", "iree-cpu", "iree-cpu-sync", "iree-vmvx")


class CandidateRejected(StepRejected):
    """A sample that shrinking or ablation made up could not be checked: a job
    on it hit a bug of ours or a rule of the pipeline that the edit broke (a
    ``torch.export`` guard of a dynamic export, say). The reducer counts it as
    a rejected step: it costs that step, never the phase or the campaign."""


@dataclass(frozen=True)
class LocalizeJob:
    """Worker job: the first divergent op of a mismatching (target, sample)."""

    target: Target
    sample: Sample
    batch: int
    tolerance: Tolerance = Tolerance()

    @property
    def target_name(self) -> str:
        """The target, so a worker lost while localizing is blamed on it."""
        return self.target.name

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:

        return first_divergent_op(self.target, self.sample, self.batch, self.tolerance,
                                  Timer(on_stage), cache)


@dataclass
class Finding:
    """One bug in one sample: where it is filed and the evidence."""

    bucket: str
    key: str
    verdict: Verdict
    owner: str
    target: str  # the representative: the stored case fails on it
    outcome: Outcome
    result: TargetResult
    targets: tuple[str, ...]  # every target of this sample that showed it
    culprit: str | None = None
    localization: dict[str, Any] = field(default_factory=dict)
    sample_index: int = 0
    new: bool = False
    path: Any = None


def vanished_under_observation(finding: Finding) -> bool:
    """A wrong answer localization could not see (``localize.UNOBSERVED``):
    its model repro is the only evidence, so it is stored once that reproduces."""
    return finding.verdict is Verdict.MISMATCH and \
        finding.localization.get("note") in UNOBSERVED


def stage_owner(target: Target, result: TargetResult, outcome: Outcome) -> str:
    """Who owns ``target``'s failing stage: the failure's own word when the
    pipeline knew better (torch-mlir's shared prefix), else the target's."""
    if result.failure is not None and result.failure.owner:
        return result.failure.owner
    return target.owner(outcome.stage)


def _upstream(target: Target) -> str | None:
    """The frontend before ``target``'s lowering on the other roads (None: the FX road)."""
    upstream = getattr(target, "upstream", None)
    return upstream if isinstance(upstream, str) else None


def culprit_of(localization: object) -> str | None:
    """A localization's culprit as an ``op:`` bucket key part, or None when not
    found (or when the localization job itself was lost: a failed TargetResult)."""
    culprit = localization.culprit if isinstance(localization, Localization) else None
    return f"op:{culprit}" if culprit else None


def _order(names: Sequence[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(PREFERRED_REPRESENTATIVES)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


class Triage:
    """Judges and files one sample's results; ``localize`` and ``ablate`` are
    the expensive steps, run through the worker pool."""

    def __init__(self, pool: Pool, tolerance: Tolerance,
                 ablate_budget_s: float = 60.0) -> None:
        self.pool = pool
        self.tolerance = tolerance
        self.ablate_budget_s = ablate_budget_s
        self._ablated: dict[tuple[str, tuple[str, ...]], str] = {}
        self._localization_records: dict[int, dict[str, Any]] = {}
        self.localizations = 0
        self.ablations = 0

    # -- outcomes ------------------------------------------------------------
    def tolerance_for(self, sample: Sample | None) -> Tolerance:
        """The campaign's rule widened for the sample's dtype and reduction
        lengths (``oracles.compare``, ``Tolerance.for_precision``)."""
        if sample is None:
            return self.tolerance
        return self.tolerance.for_precision(sample.config.dtype, sample.reduction_length())

    def outcomes(self, results: dict[str, TargetResult], reference: TargetResult,
                 eager: TargetResult, sample: Sample | None = None) -> dict[str, Outcome]:
        """Every target's verdict. Raises ReferenceFailed when the float64
        reference failed (the sample is ours to fix). When only eager float32
        failed, that is PyTorch's failure: it gets an outcome of its own (under
        the eager target's name) and the others are judged against float64
        alone (no eager slack in the tolerance)."""
        tolerance = self.tolerance_for(sample)
        if eager.failure is not None and (failed := reference_failed(eager)).out_of_memory:
            raise failed  # too big for a worker: no one's bug
        if reference.failure is None and eager.failure is not None:
            judged = {name: judge(result, reference, reference, tolerance)
                      for name, result in results.items()}
            judged[eager.target] = judge(eager, reference, reference, tolerance)
            return judged
        return {name: judge(result, reference, eager, tolerance)
                for name, result in results.items()}

    def findings(self, sample: Sample, targets: dict[str, Target],
                 results: dict[str, TargetResult], outcomes: dict[str, Outcome]) -> list[Finding]:
        """Group one sample's failing targets into findings, each with its owner and culprit."""
        failing = [name for name in targets if outcomes[name].verdict is not Verdict.PASS]
        clusters = self._clusters(failing, targets, results, outcomes)
        culprits = self._culprits(sample, targets, outcomes, clusters)
        observations = [Observation(outcomes[name], stage_owner(targets[name], results[name],
                                                                outcomes[name]),
                                    targets[name].lowering_owner,
                                    culprits.get(clusters.get(name, -1)), clusters.get(name, 0),
                                    _upstream(targets[name]))
                        for name in failing]
        grouped: dict[str, list[tuple[str, Any]]] = {}
        for name, blamed in zip(failing, blame(observations)):
            grouped.setdefault(blamed.bucket, []).append((name, blamed))
        found = []
        for bucket, members in grouped.items():
            names = [name for name, _ in members]
            blamed = members[0][1]
            own = [n for n, b in members
                   if stage_owner(targets[n], results[n], outcomes[n]) == b.owner]
            rep = _order(own or names)[0]
            cluster = clusters.get(rep)
            found.append(Finding(bucket, blamed.key, blamed.verdict, blamed.owner, rep,
                                 outcomes[rep], results[rep], tuple(sorted(names)),
                                 culprits.get(cluster if cluster is not None else -1),
                                 self._localization_records.get(cluster if cluster is not None
                                                                else -1, {})))
        return found

    def _clusters(self, failing: list[str], targets: dict[str, Target],
                  results: dict[str, TargetResult], outcomes: dict[str, Outcome]) -> dict[str, int]:
        """Mismatching targets on one lowering with the same wrong numbers share a cluster."""
        clusters: dict[str, int] = {}
        heads: list[str] = []
        for name in failing:
            if outcomes[name].verdict is not Verdict.MISMATCH:
                continue
            for i, head in enumerate(heads):
                # One lowering, or (the other roads) one frontend's file:
                # onnxruntime beside the ONNX targets that lowered it (oracles.blame).
                upstream = _upstream(targets[head])
                if (targets[head].lowering_owner == targets[name].lowering_owner
                        or upstream is not None and upstream == _upstream(targets[name])) and \
                        same_wrong_answer(results[head].outputs, results[name].outputs):
                    clusters[name] = i
                    break
            else:
                clusters[name] = len(heads)
                heads.append(name)
        return clusters

    def _culprits(self, sample: Sample, targets: dict[str, Target],
                  outcomes: dict[str, Outcome], clusters: dict[str, int]) -> dict[int, str]:
        """Localize each cluster once, on its cheapest member, in parallel."""
        self._localization_records = {}
        reps: dict[int, str] = {}
        for cluster in sorted(set(clusters.values())):
            reps[cluster] = _order([n for n, c in clusters.items() if c == cluster])[0]
        jobs = [LocalizeJob(targets[rep], sample, int(outcomes[rep].numbers.get("batch", 0)),
                            self.tolerance_for(sample)) for rep in reps.values()]
        # A localization that trips over a bug of ours loses the culprit, not the sample.
        answers = self.pool.run(jobs, faults=True) if jobs else []
        self.localizations += len(jobs)
        culprits: dict[int, str] = {}
        for (cluster, rep), answer in zip(reps.items(), answers):
            record = answer.to_dict() if isinstance(answer, Localization) else {
                "method": "none", "note": "localization job failed"}
            record["target"] = rep
            culprit = culprit_of(answer)
            if culprit is None:
                culprit = self._ablated_culprit(targets[rep], sample)
                record["fallback"] = culprit
            self._localization_records[cluster] = record
            culprits[cluster] = culprit
        return culprits

    def _ablated_culprit(self, target: Target, sample: Sample) -> str:
        """Feature ablation on ``target``: the minimal feature set that still
        mismatches (memoized per target and feature set: it costs many runs)."""
        memo = (target.name, tuple(sample.features()))
        if memo in self._ablated:
            return self._ablated[memo]

        def still_mismatches(candidate: Sample) -> bool:
            try:
                return self.solo_verdict(target, candidate)[0] is Verdict.MISMATCH
            except CandidateRejected:
                return False

        self.ablations += 1
        ablation = ablate(sample, still_mismatches, self.ablate_budget_s)
        culprit = "features:" + (",".join(ablation.minimal) or "none")
        self._ablated[memo] = culprit
        return culprit

    # -- one target alone (shrinking, replay) ----------------------------------
    def solo_verdict(self, target: Target, sample: Sample) -> tuple[Verdict, Outcome | None,
                                                                     TargetResult | None]:
        """Run ``sample`` on ``target`` with the references; PASS when the
        references themselves reject it (such a candidate is not a bug)."""

        reference, eager = resolve_targets([REFERENCE, EAGER])
        ref, eag, got = self._checked([(reference, sample), (eager, sample), (target, sample)])
        try:
            outcome = judge(got, ref, eag, self.tolerance_for(sample))
        except ReferenceFailed:
            return Verdict.PASS, None, None
        return outcome.verdict, outcome, got

    def solo_error_keys(self, target: Target, samples: list[Sample]
                        ) -> list[str | None | CandidateRejected]:
        """The error key ``target`` alone gives each sample, from the target's
        job only, side by side (one job each): what an error bucket's shrink
        step needs (an export or lowering failure never compiles, a compile
        failure never runs, and the references are not run). None where the
        target raised no error; a sample whose job hit a bug of ours gets its
        ``CandidateRejected``."""

        keys: list[str | None | CandidateRejected] = []
        for got in self.pool.run([(target, sample) for sample in samples], faults=True):
            if isinstance(got, HarnessFault):
                keys.append(_rejected(got))
            elif got.failure is None:
                keys.append(None)
            else:
                verdict, line, op = classify(got.failure)
                outcome = Outcome(target.name, verdict, got.failure.stage)
                keys.append(error_key(verdict, stage_owner(target, got, outcome), op, line))
        return keys

    def references_accept(self, sample: Sample) -> bool:
        """Whether eager float64 and float32 both run ``sample``: a candidate
        they reject is no one's bug (a shrink step keeps only samples they run)."""

        answers = self._checked([(t, sample) for t in resolve_targets([REFERENCE, EAGER])])
        return all(answer.failure is None for answer in answers)

    def solo_key(self, target: Target, sample: Sample, culprit_method: str | None) -> str | None:
        """The key ``target`` alone gives ``sample`` (no cross-target blame): what
        shrinking holds fixed. None when it passes. ``culprit_method`` ("op" or
        "features") says how a mismatch's culprit is recomputed.

        For an op culprit, localization alone is tried first: it compiles the
        program with its intermediates exposed and judges it against float64
        eager itself, so when it names a culprit the case is a mismatch in
        that op at the cost of one compile instead of two."""
        (key,) = self.solo_keys(target, [sample], culprit_method)
        if isinstance(key, CandidateRejected):
            raise key
        return key

    def solo_keys(self, target: Target, samples: list[Sample], culprit_method: str | None
                  ) -> list[str | None | CandidateRejected]:
        """``solo_key`` of several samples side by side: each round's jobs for
        all of them in one ``pool.run`` (a wrong answer's shrink steps use
        every worker, as an error's do); a sample whose job hit a bug of ours
        gets its ``CandidateRejected``."""
        keys: dict[int, str | None | CandidateRejected] = {}
        # Localization on batch 0, by sample: kept for a wrong answer first
        # seen on batch 0, whose culprit would otherwise be compiled again.
        quick: list[Any] = []
        if culprit_method == "op":
            quick = self.pool.run([LocalizeJob(target, s, 0, self.tolerance_for(s))
                                   for s in samples], faults=True)
            for i, answer in enumerate(quick):
                if culprit_of(answer):
                    keys[i] = mismatch_key(target.name, str(culprit_of(answer)))
        rest = [i for i in range(len(samples)) if i not in keys]
        reference, eager = resolve_targets([REFERENCE, EAGER])
        answers = self.pool.run([(t, samples[i]) for i in rest for t in (reference, eager, target)],
                                faults=True)
        wrong: dict[int, Outcome] = {}
        for n, i in enumerate(rest):
            ref, eag, got = answers[3 * n:3 * n + 3]
            fault = next((a for a in (ref, eag, got) if isinstance(a, HarnessFault)), None)
            if fault is not None:
                keys[i] = _rejected(fault)
                continue
            try:
                outcome = judge(got, ref, eag, self.tolerance_for(samples[i]))
            except ReferenceFailed:
                keys[i] = None
                continue
            if outcome.verdict is Verdict.PASS:
                keys[i] = None
            elif outcome.verdict is not Verdict.MISMATCH:
                keys[i] = error_key(outcome.verdict, stage_owner(target, got, outcome),
                                    outcome.op, outcome.error)
            elif culprit_method == "op":
                wrong[i] = outcome
            else:
                keys[i] = mismatch_key(target.name, "mismatch")
        later = {i: batch for i, outcome in wrong.items()
                 if (batch := int(outcome.numbers.get("batch", 0)))}
        located = dict(zip(later, self.pool.run(
            [LocalizeJob(target, samples[i], batch, self.tolerance_for(samples[i]))
             for i, batch in later.items()], faults=True))) if later else {}
        for i in wrong:
            answer = located[i] if i in later else quick[i]
            keys[i] = _rejected(answer) if isinstance(answer, HarnessFault) else \
                mismatch_key(target.name, culprit_of(answer) or "unlocalized")
        return [keys[i] for i in range(len(samples))]

    def _checked(self, jobs: list[Any]) -> list[Any]:
        """``pool.run`` for samples someone made up (shrink or ablation
        candidates, replayed cases): a job that hit a bug of ours raises
        ``CandidateRejected`` with its last traceback line, once all are in."""

        answers = self.pool.run(jobs, faults=True)
        for answer in answers:
            if isinstance(answer, HarnessFault):
                raise _rejected(answer)
        return answers


def _rejected(fault: HarnessFault) -> CandidateRejected:
    """A job on a made-up sample that hit a bug of ours: the step it judged is
    rejected, saying the target and the traceback's last line."""
    lines = fault.traceback.strip().splitlines() or [""]
    return CandidateRejected(f"{fault.target}: {lines[-1]}")
