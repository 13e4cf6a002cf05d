"""The session apart from the campaign (unit tier: no worker processes; the
pool is faked or runs jobs in this process): replay, the matrix and
``dlrm-fuzz repro`` use a ``Session`` and build no campaign, a session closes
its pool and restores the signal handlers whatever its body raised, and it
judges one sample on FAKE targets into findings without filing them."""

from __future__ import annotations

import ast
import signal
from pathlib import Path
from typing import Any, Callable

import pytest

import fuzz.cli.corpus
import fuzz.engine.session
import fuzz.regress.matrix
import fuzz.regress.replay
from fuzz.engine.records import CampaignOptions
from fuzz.engine.session import Session
from fuzz.workers.interface import ExecuteJob
from oracles import Verdict
from tests.helpers import tiny_sample


@pytest.mark.parametrize("module", [fuzz.regress.replay, fuzz.regress.matrix, fuzz.cli.corpus])
def test_replay_matrix_and_repro_use_a_session_not_a_campaign(module: Any) -> None:
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {(node.module, alias.name) for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert ("fuzz.engine.session", "Session") in imported
    assert not [pair for pair in imported if pair[0] == "fuzz.engine.campaign"
                or pair[1] == "Campaign"]


def test_the_matrix_checks_its_samples_in_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_matrix`` runs every sample in one entered session (a fake here)."""
    seen: list[str] = []

    class FakeSession:
        def __init__(self, options: CampaignOptions) -> None:
            self.targets = [type("T", (), {"name": "fake-ok"})()]

        def __enter__(self) -> "FakeSession":
            seen.append("enter")
            return self

        def __exit__(self, *exc: object) -> None:
            seen.append("exit")

        def check_samples(self, samples: list[Any],
                          on_sample: Callable[[int, list[Any]], None]) -> None:
            seen.append(f"check {len(samples)}")
            for i in range(len(samples)):
                on_sample(i, [])

    monkeypatch.setattr(fuzz.regress.matrix, "Session", FakeSession)
    matrix = fuzz.regress.matrix.build_matrix(CampaignOptions(targets=("fake-ok",)),
                                              features=["plain"], seeds=2)
    assert seen == ["enter", "check 2", "exit"]
    assert matrix.cells == {"plain": {"fake-ok": "PASS"}}


class _Pool:
    """A pool that records being closed (the session opens it as a WorkerPool)."""

    opened: list["_Pool"] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.closed = False
        self.reserved = kwargs.get("reserved")
        self.opened.append(self)

    def __enter__(self) -> "_Pool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True


def test_a_session_closes_its_pool_when_its_body_raises(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setattr(fuzz.engine.session, "WorkerPool", _Pool)
    before = signal.getsignal(signal.SIGINT)
    session = Session(CampaignOptions(targets=("fake-ok",), corpus_dir=tmp_path / "c"))
    with pytest.raises(ZeroDivisionError):
        with session:
            (pool,) = _Pool.opened
            assert session.pool is pool and session.triage is not None
            assert signal.getsignal(signal.SIGINT) is not before  # a stop is Interrupted
            1 / 0
    assert pool.closed
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize("shrink, bug_workers, reserved", [(True, 1, 1), (False, 1, 0),
                                                          (True, 0, 0)])
def test_a_session_holds_the_bug_workers_only_when_there_is_bug_work(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shrink: bool, bug_workers: int,
        reserved: int) -> None:
    """``--bug-workers N`` reserves N local workers for urgent jobs in the
    session a campaign runs in (it once reached only a test-only pool opener)."""
    monkeypatch.setattr(fuzz.engine.session, "WorkerPool", _Pool)
    _Pool.opened.clear()
    options = CampaignOptions(targets=("fake-ok",), corpus_dir=tmp_path / "c", shrink=shrink,
                              report=shrink, bug_workers=bug_workers)
    with Session(options):
        (pool,) = _Pool.opened
        assert pool.reserved == reserved


class _InProcessPool:
    """Runs each job here when it is submitted (the pool interface, no workers)."""

    slots = 1

    def __init__(self) -> None:
        self.done: list[tuple[int, Any]] = []
        self.jobs = 0

    @staticmethod
    def _answer(job: Any) -> Any:
        job = ExecuteJob(*job) if isinstance(job, tuple) else job
        return job(lambda stage: None, None)

    def submit(self, job: Any, after: int | None = None, urgent: bool = False) -> int:
        self.jobs += 1
        self.done.append((self.jobs, self._answer(job)))
        return self.jobs

    def completed(self, timeout: float | None = None) -> list[tuple[int, Any]]:
        done, self.done = self.done, []
        return done

    def run(self, jobs: list[Any], faults: bool = False) -> list[Any]:
        return [self._answer(job) for job in jobs]


def test_a_session_judges_one_sample_on_fake_targets_and_files_nothing(tmp_path: Path) -> None:
    store = tmp_path / "corpus"
    session = Session(CampaignOptions(targets=("fake-ok", "fake-raise"), corpus_dir=store))
    session.attach(_InProcessPool())  # type: ignore[arg-type]
    (found,) = session.run_sample(tiny_sample(), session.targets)
    assert found.target == "fake-raise" and found.verdict is Verdict.COMPILE_ERROR
    assert set(session.last_timings) == {"fake-ok", "fake-raise"}
    assert session.waiting == [] and not store.exists()  # judged, not filed
