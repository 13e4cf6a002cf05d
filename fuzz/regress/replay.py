"""The corpus as a regression suite (``dlrm-fuzz replay``): every stored case
re-run on the toolchain installed now, each reported against what the corpus
expects of it, the way torch-mlir's xfail sets work, but kept by the tool.

A stored case is expected to fail in its bucket (``expect`` absent or
"fail"), or, once ``--update`` recorded a fix, to pass (``expect: "pass"``).
Outcomes: XFAIL (still fails in its bucket: expected), PASS (a recorded fix
holds: expected), XPASS (now passes: fixed, news), MOVED (fails in another
bucket), REGRESSED (a recorded fix fails again), FLAKY (repeated runs
disagree), SKIPPED (its target cannot run here). A case that seems fixed or
moved is re-run ``repeat`` times before it is called so. ``--strict`` turns
every unexpected outcome into a failing exit status, so a toolchain bump PR
fails until ``--update`` records the new state.

With a focus (``--focus`` / ``--config`` / ``--preset``, ``fuzz.model.focus``)
only the stored cases inside the region are replayed: a lowering change is
checked against the cases of the feature it touches, and a case elsewhere in
the corpus neither costs time nor shows up in the report.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fuzz.store import corpus
from fuzz.engine.records import CampaignOptions, Observed, ReplayRecord
from fuzz.engine.session import Session
from fuzz.model.focus import Focus
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import Target
from fuzz.targets.versions import tool_versions

__all__ = ["ReplayStatus", "ReplayResult", "judge_runs", "replay_corpus", "record_state",
           "UNEXPECTED"]


class ReplayStatus(str, enum.Enum):
    """How a stored case behaved on replay compared with what the corpus expects."""
    XFAIL = "XFAIL"
    PASS = "PASS"
    XPASS = "XPASS"
    MOVED = "MOVED"
    REGRESSED = "REGRESSED"
    FLAKY = "FLAKY"
    SKIPPED = "SKIPPED"


UNEXPECTED = frozenset({ReplayStatus.XPASS, ReplayStatus.MOVED, ReplayStatus.REGRESSED,
                        ReplayStatus.FLAKY})


@dataclass(frozen=True)
class ReplayResult:
    """One stored case's replay: its status, the buckets it lands in now, timings."""
    bucket: str
    target: str
    status: ReplayStatus
    now: tuple[str, ...]  # the buckets the case lands in today (last run)
    runs: int
    seconds: float
    note: str = ""
    keys: tuple[str, ...] = ()  # the signature keys of ``now``: what each failure says

    def to_dict(self) -> dict[str, object]:
        """The JSON form ``replay --format json`` prints (read back by ``bump``)."""
        return {"bucket": self.bucket, "target": self.target, "status": self.status.value,
                "now": list(self.now), "keys": list(self.keys), "runs": self.runs,
                "seconds": round(self.seconds, 3), "note": self.note}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "ReplayResult":
        """Read a result back from ``replay --format json`` output (as ``bump`` does)."""
        def strings(value: object) -> tuple[str, ...]:
            return tuple(str(v) for v in value) if isinstance(value, list) else ()
        runs, seconds = data.get("runs", 1), data.get("seconds", 0.0)
        return cls(str(data["bucket"]), str(data["target"]), ReplayStatus(data["status"]),
                   strings(data.get("now")), int(runs) if isinstance(runs, (int, float)) else 1,
                   float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                   str(data.get("note", "")), strings(data.get("keys")))

    @property
    def unexpected(self) -> bool:
        """A surprise against the corpus: ``replay --strict`` fails on it unless ``--update``."""
        return self.status in UNEXPECTED


def judge_runs(entry: CorpusEntry, records: list[ReplayRecord]) -> ReplayStatus:
    """One status from one or more runs of a stored case (pure)."""
    if any(r.status == Observed.SKIPPED for r in records):
        return ReplayStatus.SKIPPED
    if len({(r.status, r.now) for r in records}) > 1:
        return ReplayStatus.FLAKY
    observed = records[0]
    if entry.expect == "pass":
        return ReplayStatus.PASS if observed.status == Observed.FIXED else ReplayStatus.REGRESSED
    if observed.status == Observed.FIXED:
        return ReplayStatus.XPASS
    if observed.status == Observed.STILL_FAILING or (entry.moved_to and
                                              set(observed.now) == set(entry.moved_to)):
        return ReplayStatus.XFAIL  # in its bucket, or where --update recorded it moved
    return ReplayStatus.MOVED


def _as_expected(entry: CorpusEntry, record: ReplayRecord) -> bool:
    return judge_runs(entry, [record]) in (ReplayStatus.XFAIL, ReplayStatus.PASS,
                                           ReplayStatus.SKIPPED)


def replay_corpus(root: Path, table: dict[str, Target] | None = None, repeat: int = 3,
                  workers: int = 2, timeout_s: float = 300.0, cache_dir: Path | None = None,
                  on_result: Callable[[ReplayResult], None] | None = None,
                  focus: Focus | None = None) -> tuple[list[ReplayResult], list[str]]:
    """Replay every readable entry of ``root`` (with ``focus``: every one
    whose stored sample lies inside it, config, input cases and shape class);
    (results, junk lines)."""
    if repeat < 1:
        raise ValueError(f"repeat={repeat}: must be >= 1")
    entries, junk = corpus.load(root)
    if focus is not None:
        entries = [entry for entry in entries if focus.holds(entry.sample)]
    results: list[ReplayResult] = []
    if not entries:
        return results, junk
    options = CampaignOptions(corpus_dir=root, table=table, targets=(), workers=workers,
                              timeout_s=timeout_s, cache_dir=cache_dir, replay=False,
                              shrink=False, report=False)

    def collect(entry: CorpusEntry, records: list[ReplayRecord]) -> None:
        status = judge_runs(entry, records)
        result = ReplayResult(entry.bucket, entry.target, status, records[-1].now, len(records),
                              sum(r.seconds for r in records), records[-1].note,
                              records[-1].keys)
        results.append(result)
        if on_result is not None:
            on_result(result)

    def surprising(entry: CorpusEntry, record: ReplayRecord) -> bool:
        return not _as_expected(entry, record)

    # Only a surprise is re-run (before calling anything fixed, moved or regressed).
    with Session(options) as session:
        session.replay_entries(entries, repeat, collect, surprising)
    return results, junk


def record_state(root: Path, result: ReplayResult) -> bool:
    """``--update``: make what was observed the new expectation of the case."""
    if result.status is ReplayStatus.XPASS:
        return corpus.update_case(root, result.bucket, expect="pass", fixed_in=tool_versions())
    if result.status is ReplayStatus.REGRESSED:
        return corpus.update_case(root, result.bucket, expect="fail", fixed_in=None)
    if result.status is ReplayStatus.MOVED:
        return corpus.update_case(root, result.bucket, moved_to=list(result.now))
    return False  # XFAIL / PASS: as recorded; FLAKY / SKIPPED: nothing certain to record
