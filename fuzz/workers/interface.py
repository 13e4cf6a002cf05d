"""What the engine knows of a worker pool, apart from how one runs jobs: the
job types (``Job``, ``ExecuteJob``), the answer of a job that hit a bug of ours
(``HarnessFault`` / ``HarnessError``), and ``AnswerQueue`` = ``Pool``, the
interface the local process pool (``fuzz.workers.pool``) and the Ray pool
(``fuzz.workers.raypool``) both implement and the campaign, triage and bug
work are typed against."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence

from fuzz.model.sample import Sample
from fuzz.targets.cache import ArtifactCache
from fuzz.targets.catalog import Target
from fuzz.workers.execute import execute
from oracles.results import TargetResult

__all__ = ["AnswerQueue", "ExecuteJob", "HarnessError", "HarnessFault", "Job", "Pool"]


class HarnessError(RuntimeError):
    """A bug of ours inside a worker (not a failure of the toolchain under test)."""


@dataclass(frozen=True)
class HarnessFault:
    """The answer of a job that hit a bug of ours (from ``completed``; ``run``
    raises it as a HarnessError): the campaign reports it and goes on."""

    target: str
    traceback: str

    def __str__(self) -> str:
        return f"bug in dlrm-fuzz while running {self.target}:\n{self.traceback}"


class Job(Protocol):
    """Work for a worker: picklable, names its target (for a lost worker's
    CRASH / TIMEOUT result) and runs with the worker's stage hook and cache."""

    @property
    def target_name(self) -> str:
        """The target a lost worker's CRASH or TIMEOUT result is filed under."""

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any: ...


@dataclass(frozen=True)
class ExecuteJob:
    """Compile a sample on a target and run every batch: a ``TargetResult``."""

    target: Target
    sample: Sample

    @property
    def target_name(self) -> str:
        """The target compiled, so a worker that dies blames it."""
        return self.target.name

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> TargetResult:
        return execute(self.target, self.sample, on_stage, cache)


class AnswerQueue:
    """``run`` on top of ``submit`` / ``completed``, shared by the local and
    the Ray pool: a caller waiting in ``run`` (localization in the middle of
    a campaign) keeps the answers of jobs others submitted for ``completed``,
    and a bug of ours (a ``HarnessFault`` answer) is raised to it. It is the
    pool interface the campaign, triage and bug work are typed against
    (``Pool``); both pools implement every method that raises here."""

    # Workers replaced after a crash or hang, and seconds workers spent on jobs.
    replaced: int
    busy_s: float

    @property
    def slots(self) -> int:
        """How many jobs run at once."""
        raise NotImplementedError

    @property
    def free_slots(self) -> int:
        """How many urgent jobs would start at once (at least one): a caller
        blocked on its own jobs (a shrink step's candidates) sends no more,
        so that none of them waits behind a compile another job started.
        A pool that cannot tell says ``slots``."""
        return self.slots

    _ready: list[tuple[int, Any]]
    # Queued ticket -> the ticket it waits for (``submit(after=...)``).
    _after: dict[int, int]
    # Tickets submitted urgent (``run``); a few ints per blocking call.
    _urgent: set[int]

    def submit(self, job: Any, after: int | None = None, urgent: bool = False) -> int:
        """Queue ``job`` (after ticket ``after``, or ahead if urgent); returns its ticket."""
        raise NotImplementedError

    def _enqueue(self, queue: "collections.deque[Any]", entry: Any, urgent: bool) -> None:
        """Queue ``entry`` (its ticket first): an urgent one goes ahead of every
        job that is not, after the urgent ones queued before it. A caller
        blocked in ``run`` (a shrink step, a localization) then waits for its
        own jobs, not for the generated samples' compiles queued before them."""
        if not urgent:
            queue.append(entry)
            return
        self._urgent.add(entry[0])
        position = 0
        while position < len(queue) and queue[position][0] in self._urgent:
            position += 1
        queue.insert(position, entry)

    @property
    def pending(self) -> int:
        """Jobs submitted whose answers are not collected yet: whether waiting can end."""
        raise NotImplementedError

    def cancel(self, tickets: Iterable[int]) -> set[int]:
        """Drop the queued jobs among ``tickets`` that no worker has started;
        returns the tickets dropped (they never answer). Running jobs go on:
        a campaign at the end of its budget stops feeding the workers without
        throwing away work already paid for."""
        wanted = set(tickets)
        dropped: set[int] = set()
        for queue in self._queues_to_cancel():
            kept = [entry for entry in queue if entry[0] not in wanted]
            dropped.update(entry[0] for entry in queue if entry[0] in wanted)
            queue.clear()
            queue.extend(kept)
        for ticket in dropped:
            self._after.pop(ticket, None)
            self._urgent.discard(ticket)
        return dropped

    def _queues_to_cancel(self) -> "list[collections.deque[Any]]":
        """The queues of jobs not started yet (entries start with their ticket)."""
        raise NotImplementedError

    def _open_tickets(self) -> set[int]:
        """Tickets queued or running (not answered yet)."""
        raise NotImplementedError

    def _wait_for(self, ticket: int, after: int | None) -> None:
        if after is not None:
            self._after[ticket] = after

    def _take(self, queue: "collections.deque[Any]", urgent_only: bool = False) -> Any:
        """The first queued entry (its ticket first) whose prerequisite is
        answered, removed from ``queue``; None when every queued job waits.
        ``urgent_only``: an urgent entry or none (for a worker held for them).

        A follower (a target that reuses its leader's export, program or
        artifact from the cache) waits for its leader instead of starting
        beside it and doing the same work a second time: an idle worker takes
        a later job, or waits."""
        if not queue or (urgent_only and queue[0][0] not in self._urgent):
            return None
        if not self._after:
            entry = queue.popleft()
            self._urgent.discard(entry[0])
            return entry
        unanswered = self._open_tickets()
        for position, entry in enumerate(queue):
            if urgent_only and entry[0] not in self._urgent:
                return None  # the urgent ones come first: none is free to start
            if self._after.get(entry[0]) not in unanswered:
                del queue[position]
                self._after.pop(entry[0], None)
                self._urgent.discard(entry[0])
                return entry
        return None

    @property
    def waiting(self) -> int:
        """Queued jobs whose prerequisite is not answered yet."""
        unanswered = self._open_tickets() if self._after else set()
        return sum(1 for ticket, before in self._after.items()
                   if ticket in unanswered and before in unanswered)

    @property
    def runnable(self) -> int:
        """Jobs running or free to start: what keeps the workers busy (a
        caller feeds the pool while this is at most ``slots``)."""
        return self.pending - len(self._ready) - self.waiting

    def _dispatch(self) -> None:
        """Start queued jobs on idle workers."""
        raise NotImplementedError

    def _collect(self, until: float | None) -> list[tuple[int, Any]]:
        """Answers that came in by ``until`` (None: wait for one)."""
        raise NotImplementedError

    def _completed(self, timeout: float | None) -> list[tuple[int, Any]]:
        """Waits until at least one job finishes (or ``timeout`` seconds pass),
        then starts queued jobs on the freed workers at once, so no worker
        waits for the caller (a pool that re-runs a lost worker's job answers
        it later, never drops it)."""
        if not self.pending:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._dispatch()
            done = self._collect(deadline)
            self._dispatch()
            if done or (deadline is not None and time.monotonic() >= deadline):
                return done

    def completed(self, timeout: float | None = None) -> list[tuple[int, Any]]:
        """Answers of finished jobs as (ticket, answer): waits until at least
        one job finishes (or ``timeout`` seconds pass)."""
        if self._ready:  # answers that came in while run() waited for its own
            ready, self._ready = self._ready, []
            return ready
        return self._completed(timeout)

    def run(self, jobs: Sequence[Any], faults: bool = False) -> list[Any]:
        """Run ``jobs`` concurrently; one answer per job, in order. A job whose
        worker dies or hangs answers a ``TargetResult`` carrying the CRASH /
        TIMEOUT failure. A bug of ours in a job raises a HarnessError once all
        are in, or (``faults``) is that job's answer, a ``HarnessFault``, so
        independent jobs (one report per bucket) keep the others' answers."""
        tickets = [self.submit(job, urgent=True) for job in jobs]
        wanted = set(tickets)
        answers: dict[int, Any] = {}
        others: list[tuple[int, Any]] = []  # other callers' jobs: kept for completed()
        while wanted - answers.keys():
            for ticket, answer in self.completed():
                if ticket in wanted:
                    answers[ticket] = answer
                else:
                    others.append((ticket, answer))
        self._ready.extend(others)
        for answer in answers.values():
            if isinstance(answer, HarnessFault) and not faults:
                raise HarnessError(str(answer))
        return [answers[t] for t in tickets]


# The type the engine holds a pool by: local processes or Ray actors.
Pool = AnswerQueue
