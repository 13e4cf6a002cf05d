"""Shrinking one bucket's stored case on its own target, keeping its bucket:
the predicate (the key a candidate gives on that target alone, and the
references accepting it), its memory across turns, and the stored case
replaced by a smaller one with the smaller case's own evidence. Apart from
``fuzz.engine.bugwork``, which decides which bucket shrinks when and for
how long; the reducer itself is ``fuzz.triage.shrink``."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from fuzz.engine.interrupt import deferred
from fuzz.engine.records import CampaignOptions, Observed, ReplayRecord, ShrinkRecord
from fuzz.model.sample import Sample
from fuzz.store import corpus
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import Target
from fuzz.triage.edits import content_hash, size_key
from fuzz.triage.findings import CandidateRejected, Triage
from fuzz.triage.shrink import StepRejected, shrink
from fuzz.workers.interface import Pool
from oracles import Verdict

__all__ = ["BucketShrinker"]


class BucketShrinker:
    """Turns at shrinking stored cases, remembering every candidate's key."""

    def __init__(self, options: CampaignOptions, *, pool: Callable[[], Pool | None],
                 triage: Callable[[], Triage | None], target: Callable[[str], Target | None],
                 replay: Callable[[CorpusEntry], ReplayRecord] | None = None) -> None:
        self.options = options
        self._pool, self._triage = pool, triage
        self.target_named = target
        # Re-runs a case the way replay will (its target and blame witnesses,
        # the whole triage): a shrunk wrong answer whose key the reducer could
        # not hold is checked with it before it replaces the stored case.
        self.replay = replay
        # The key a sample gives on a target alone (None: it passes there), by
        # (target, culprit method, the sample's content): a bucket's later
        # turns start from the stored case's key instead of compiling it again,
        # and skip the candidates an earlier turn judged (each turn restarts
        # the reducer at the stored case, skeleton steps first). The target
        # belongs in the key: one sample is often stored in several buckets,
        # one per target (seed 73's sample 7 in four), and a key by content
        # alone gave the later buckets the first one's key to hold: none of
        # their steps could ever be accepted.
        self._solo_keys: dict[tuple[str, str, str], str | None | CandidateRejected] = {}
        self._references_ok: dict[str, bool] = {}  # by content: a target-free fact

    def shrink(self, bucket: str, budget_s: float) -> ShrinkRecord:
        """One turn of at most ``budget_s`` at shrinking ``bucket``'s stored case on
        its own target, keeping its bucket; a smaller case replaces the stored one."""

        triage, pool = self._triage(), self._pool()  # the campaign's, once its pool runs
        assert triage is not None
        root = self.options.corpus_dir
        entry = corpus.load_entry(root / bucket)
        target = self.target_named(entry.target)
        if target is None:
            return ShrinkRecord(bucket, entry.target, {"skipped": "target unknown here"}, False)
        method = (entry.culprit or "").split(":", 1)[0] or None
        keys = self._solo_keys

        def memo(sample: Sample) -> tuple[str, str, str]:
            return (target.name, method or "", content_hash(sample))

        stored = memo(entry.sample)
        try:
            cached = keys.get(stored)
            wanted = cached if isinstance(cached, str) else triage.solo_key(target, entry.sample, method)
        except CandidateRejected as rejected:
            return ShrinkRecord(bucket, target.name, {
                "skipped": f"the stored case cannot be checked alone: {rejected}"}, False)
        if wanted is None:
            return ShrinkRecord(bucket, target.name, {
                "skipped": "the stored case does not fail on its target alone"}, False)
        keys[stored] = wanted

        def references_accept(candidate: Sample) -> bool:
            digest = content_hash(candidate)
            if digest not in self._references_ok:
                self._references_ok[digest] = triage.references_accept(candidate)
            return self._references_ok[digest]

        def same_bucket(candidate: Sample) -> bool:
            (judged,) = same_bucket_many([candidate])  # one rule, alone or side by side
            if isinstance(judged, StepRejected):
                raise judged
            return judged

        def same_bucket_many(candidates: list[Sample]) -> list[bool | StepRejected]:
            """Candidates side by side, one worker each (those an earlier
            turn judged from its key); of an error's, only the first that
            keeps the error is checked against the references (the reducer
            takes the first that holds; a wrong answer's key has them)."""
            seen = [memo(c) for c in candidates]  # hashed once each
            new = [(m, c) for m, c in zip(seen, candidates) if m not in keys]
            if new:
                fresh = [c for _, c in new]
                keys.update(zip((m for m, _ in new),
                                triage.solo_error_keys(target, fresh) if is_error
                                else triage.solo_keys(target, fresh, method)))
            judged: list[bool | StepRejected] = []
            for candidate, m in zip(candidates, seen):
                key = keys[m]
                if isinstance(key, CandidateRejected) or key != wanted or True in judged:
                    judged.append(key if isinstance(key, CandidateRejected) else False)
                    continue
                try:
                    judged.append(not is_error or references_accept(candidate))
                except CandidateRejected as rejected:
                    judged.append(rejected)
            return judged

        is_error = entry.verdict not in (Verdict.MISMATCH, Verdict.FLAKY)
        result = shrink(entry.sample, same_bucket, budget_s, many=same_bucket_many,
                        width=(lambda: pool.free_slots) if pool is not None else 1,
                        region=self.options.focus)
        record = _merged(entry.shrink, result.to_dict())
        keys[memo(result.sample)] = wanted  # the reducer kept it
        if size_key(result.sample) >= size_key(entry.sample):
            # A later turn that found nothing smaller still ends the record
            # (a fixpoint now, the steps summed): replay must not queue the
            # case again as cut short, and the next turn must add to it.
            with deferred():
                corpus.update_case(root, bucket, shrink=record)
            return ShrinkRecord(bucket, target.name, record, False)
        # The stored evidence (error line, numbers, programs) must be the shrunk case's.
        try:
            _, outcome, got = triage.solo_verdict(target, result.sample)
        except CandidateRejected:
            return ShrinkRecord(bucket, target.name, record, False)
        if outcome is None or got is None:
            return ShrinkRecord(bucket, target.name, record, False)
        shrunk = dataclasses.replace(
            entry, sample=result.sample, shrink=record, features=tuple(result.sample.features()),
            error=outcome.error, op=outcome.op, numbers=outcome.numbers,
            timings=outcome.timings, detail=outcome.detail or entry.detail, texts=got.texts)
        if not is_error and method != "op" and self.replay is not None:
            # The reducer held "a wrong answer on this target", not the
            # features ablation names: a smaller case the whole triage files
            # elsewhere would be reported "moved" by every replay.
            again = self.replay(shrunk)
            if again.status is not Observed.STILL_FAILING:
                moved = {**record, "stopped": "moved", "moved_to": list(again.now)}
                return ShrinkRecord(bucket, target.name, moved, False)
        with deferred():
            replaced = corpus.replace_if_smaller(root, shrunk, size_key)
        return ShrinkRecord(bucket, target.name, record, replaced)


def _merged(before: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, Any]:
    """A case shrunk again continues its record: sizes from the very first
    case, steps and seconds summed over every pass."""
    if not before or "size_before" not in before:
        return now
    merged = dict(now, size_before=before["size_before"],
                  passes=int(before.get("passes", 1)) + 1)
    for counter in ("steps_tried", "steps_accepted", "steps_rejected", "seconds"):
        merged[counter] = before.get(counter, 0) + now.get(counter, 0)
    by_pass = {name: list(spent) for name, spent in before.get("by_pass", {}).items()}
    for name, spent in now.get("by_pass", {}).items():
        earlier = by_pass.get(name, [0, 0, 0.0])
        by_pass[name] = [earlier[0] + spent[0], earlier[1] + spent[1],
                         round(earlier[2] + spent[2], 3)]
    if by_pass:
        merged["by_pass"] = by_pass
    return merged
