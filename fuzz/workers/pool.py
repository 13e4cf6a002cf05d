"""Persistent worker processes that compile and run samples, so that a
compiler that segfaults, aborts, hangs or eats memory costs one worker, not
the campaign.

Workers are started with ``spawn`` (fork is unsafe with GPU drivers and with
the threads torch starts), pay the torch / torch-mlir / IREE imports once, and
live across samples. Each job has a wall-clock limit and each worker a
memory cap (RLIMIT_DATA); a dead or stuck worker becomes a CRASH / TIMEOUT result
carrying the stage it was in and the tail of its stderr, and is replaced.
"""

from __future__ import annotations

import collections
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

from fuzz.targets.cache import ArtifactCache
from fuzz.workers.execute import execute
from fuzz.targets.pipeline import STAGE_LOG_ENV
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target
from oracles.results import Failure, Stage, TargetResult

__all__ = ["Pool", "WorkerPool", "AnswerQueue", "HarnessError", "HarnessFault", "Job", "ExecuteJob",
           "STDERR_TAIL_BYTES"]

STDERR_TAIL_BYTES = 4096
_STAGE_BYTES = 32
_STARTUP_TIMEOUT_S = 300.0
_START_ATTEMPTS = 3  # tries to start a replacement worker before giving up


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


def _worker_main(conn: Any, stderr_path: str, memory_mb: int | None, stage: Any,
                 preload: bool, cache_dir: str | None, cache_mb: int) -> None:
    """Worker loop: receive (job id, target, sample), send back a TargetResult."""
    # Ctrl-C in a terminal reaches the whole process group: the campaign
    # process decides how to stop and reaps us; a worker must not die of it
    # mid-job (its death would be taken for a CRASH of the toolchain).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.environ[STAGE_LOG_ENV] = stderr_path + ".stage"
    import faulthandler
    import warnings

    faulthandler.enable()
    warnings.filterwarnings("ignore")
    if memory_mb:
        import resource

        limit = memory_mb * 1024 * 1024
        # RLIMIT_DATA, not RLIMIT_AS: the CUDA driver reserves far more address
        # space than any such cap (on an H200, IREE's CUDA device creation fails
        # with CUDA_ERROR_OUT_OF_MEMORY under RLIMIT_AS of 8 GiB, and in
        # cuMemPoolCreate under 64 GiB), while RLIMIT_DATA counts the private
        # writable memory a runaway compiler or eager reference takes, and
        # refuses it the same way (MemoryError, ENOMEM).
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if preload:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
        import torch  # noqa: F401
        import torch_mlir.fx  # noqa: F401

    def on_stage(name: str) -> None:
        stage.value = name.encode()[:_STAGE_BYTES - 1]

    cache = ArtifactCache(Path(cache_dir), cache_mb * 1024 * 1024) if cache_dir else None

    conn.send(("ready", None, None))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        job_id, job = message
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
        Path(stderr_path + ".stage").unlink(missing_ok=True)
        on_stage("start")
        try:
            result = job(on_stage, cache)
        except MemoryError:
            # The address-space cap was hit in Python code: report it like a
            # native allocation failure and let the parent replace us.
            conn.send(("oom", job_id, stage.value.decode()))
            return
        except BaseException:
            conn.send(("harness-error", job_id, traceback.format_exc()))
            continue
        conn.send(("result", job_id, result))


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

    def _take(self, queue: "collections.deque[Any]") -> Any:
        """The first queued entry (its ticket first) whose prerequisite is
        answered, removed from ``queue``; None when every queued job waits.

        A follower (a target that reuses its leader's export, program or
        artifact from the cache) waits for its leader instead of starting
        beside it and doing the same work a second time: an idle worker takes
        a later job, or waits."""
        if not queue:
            return None
        if not self._after:
            entry = queue.popleft()
            self._urgent.discard(entry[0])
            return entry
        unanswered = self._open_tickets()
        for position, entry in enumerate(queue):
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


@dataclass
class _Worker:
    process: Any
    conn: Any
    stage: Any
    stderr_path: str
    job: int | None = None  # the ticket of the job it runs
    work: Job | None = None
    started: float = 0.0
    deadline: float = 0.0


class WorkerPool(AnswerQueue):
    """``size`` spawned workers. ``submit`` / ``completed`` keep them busy
    without a barrier (a caller feeds the next job as soon as one finishes);
    ``run(jobs)`` executes a list and returns one answer per job, in order."""

    def __init__(self, size: int, timeout_s: float = 120.0, memory_mb: int | None = 8192,
                 preload: bool = True, cache_dir: Path | None = None, cache_mb: int = 2048) -> None:
        if size < 1:
            raise ValueError(f"workers={size}: must be >= 1")
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.preload = preload
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self.cache_mb = cache_mb
        self._context = multiprocessing.get_context("spawn")
        self._log_dir = tempfile.mkdtemp(prefix="dlrm-fuzz-workers-")
        # Workers inherit this process's runtime folder (removed when it
        # exits) instead of each making one that a killed worker leaves behind.
        from fuzz.targets.devices import ensure_runtime_environment

        ensure_runtime_environment()
        self._serial = 0
        self.replaced = 0
        self.busy_s = 0.0  # seconds workers spent on jobs: the busy fraction's numerator
        self._tickets = 0
        self._queue: collections.deque[tuple[int, Job]] = collections.deque()
        self._ready: list[tuple[int, Any]] = []
        self._after: dict[int, int] = {}
        self._urgent: set[int] = set()
        self._workers: list[_Worker] = []
        try:
            for _ in range(size):
                self._workers.append(self._start())
            for worker in self._workers:
                self._await_ready(worker)
        except BaseException:  # a stop signal or a failed start: no orphan workers
            for worker in self._workers:
                _kill(worker.process)
            raise

    # -- lifecycle ---------------------------------------------------------
    def _start(self) -> _Worker:
        self._serial += 1
        parent, child = self._context.Pipe()
        stage = self._context.Array("c", _STAGE_BYTES, lock=False)
        stderr_path = os.path.join(self._log_dir, f"worker-{self._serial}.stderr")
        process = self._context.Process(
            target=_worker_main, args=(child, stderr_path, self.memory_mb, stage, self.preload,
                  self.cache_dir, self.cache_mb),
            daemon=True, name=f"dlrm-fuzz-worker-{self._serial}")
        process.start()
        child.close()
        return _Worker(process, parent, stage, stderr_path)

    def _await_ready(self, worker: _Worker) -> None:
        if not worker.conn.poll(_STARTUP_TIMEOUT_S):
            raise HarnessError(f"worker did not start within {_STARTUP_TIMEOUT_S:.0f}s: "
                               f"{_tail(worker.stderr_path)}")
        try:
            worker.conn.recv()
        except EOFError as exc:
            raise HarnessError("worker died while starting (imports failed?): "
                               f"{_tail(worker.stderr_path)}") from exc

    def _replace(self, index: int) -> None:
        """A fresh worker in ``index``'s place. A replacement that does not
        start (a machine overloaded for minutes) is killed and tried again:
        only ``_START_ATTEMPTS`` failures in a row are a HarnessError."""
        old = self._workers[index]
        _kill(old.process)
        old.conn.close()
        self.replaced += 1
        for attempt in range(1, _START_ATTEMPTS + 1):
            new = self._start()
            self._workers[index] = new
            try:
                self._await_ready(new)
                return
            except HarnessError:
                _kill(new.process)
                new.conn.close()
                if attempt == _START_ATTEMPTS:
                    raise

    def close(self) -> None:
        """Stop every worker: idle ones are asked to exit, busy ones (a compile
        that may run for minutes, abandoned by an interrupted campaign) are
        killed at once; all are reaped, so no process outlives the pool."""
        try:
            for worker in self._workers:
                if worker.job is not None:
                    _kill(worker.process)
                    continue
                try:
                    worker.conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
            for worker in self._workers:
                worker.process.join(timeout=5)
                _kill(worker.process)
        finally:
            # A second stop signal (``timeout`` forwards SIGTERM, so a process
            # often gets two) can cut the joins above short: the workers ignore
            # SIGTERM, and multiprocessing's exit handler would wait for a
            # live one forever (seen: a campaign that printed its summary and
            # never exited).
            for worker in self._workers:
                if worker.process.is_alive():
                    worker.process.kill()
        self._workers = []
        # The workers' stderr files (read into CRASH results as workers die).
        shutil.rmtree(self._log_dir, ignore_errors=True)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running -----------------------------------------------------------
    @property
    def slots(self) -> int:
        """How many jobs run at once: what a scheduler keeps the pool fed with."""
        return len(self._workers)

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet answered (queued or running)."""
        return len(self._queue) + len(self._ready) + sum(w.job is not None for w in self._workers)

    def submit(self, job: Job | tuple[Target, Sample], after: int | None = None,
               urgent: bool = False) -> int:
        """Queue one job (a ``(target, sample)`` pair is an ``ExecuteJob``) and
        start it if a worker is idle; its answer comes back from
        :meth:`completed` under the returned ticket. ``after``: a ticket this
        job should not start before (its answer is in), while other jobs can;
        ``urgent``: ahead of the queued jobs that are not."""
        self._tickets += 1
        self._enqueue(self._queue, (self._tickets, ExecuteJob(*job) if isinstance(job, tuple)
                                    else job), urgent)
        self._wait_for(self._tickets, after)
        self._dispatch()
        return self._tickets

    def _queues_to_cancel(self) -> "list[collections.deque[Any]]":
        return [self._queue]

    def _open_tickets(self) -> set[int]:
        return {ticket for ticket, _ in self._queue} | \
            {w.job for w in self._workers if w.job is not None}

    def _dispatch(self) -> None:
        for worker in self._workers:
            if worker.job is None and self._queue:
                entry = self._take(self._queue)
                if entry is None:
                    return
                ticket, job = entry
                worker.job, worker.work = ticket, job
                worker.started = time.monotonic()
                worker.deadline = worker.started + self.timeout_s
                worker.conn.send((ticket, job))

    def _collect(self, until: float | None) -> list[tuple[int, Any]]:
        busy = [i for i, w in enumerate(self._workers) if w.job is not None]
        if not busy:
            return []
        wait_until = min(self._workers[i].deadline for i in busy)
        if until is not None:
            wait_until = min(wait_until, until)
        handles: list[Any] = []
        for i in busy:
            handles += [self._workers[i].conn, self._workers[i].process.sentinel]
        multiprocessing.connection.wait(handles, timeout=max(0.0, wait_until - time.monotonic()))
        done: list[tuple[int, Any]] = []
        for i in busy:
            worker = self._workers[i]
            ticket, job = worker.job, worker.work
            assert ticket is not None and job is not None
            if worker.conn.poll():
                try:
                    kind, _, payload = worker.conn.recv()
                except (EOFError, OSError):
                    kind, payload = "died", None
            elif not worker.process.is_alive():
                kind, payload = "died", None
            elif time.monotonic() >= worker.deadline:
                kind, payload = "timeout", None
            else:
                continue
            self.busy_s += time.monotonic() - worker.started
            if kind == "harness-error":  # the worker lives on; its job's answer says what broke
                worker.job = worker.work = None
                done.append((ticket, HarnessFault(job.target_name, str(payload))))
                continue
            if kind == "result":
                worker.job = worker.work = None
                done.append((ticket, payload))
                continue
            done.append((ticket, self._lost_worker_result(worker, job.target_name, kind)))
            self._replace(i)
        return done

    def _lost_worker_result(self, worker: _Worker, target: str, kind: str) -> TargetResult:
        stage = Stage.parse(worker.stage.value.decode() or Stage.START.value)
        if kind == "timeout":
            _kill(worker.process)
            failure = Failure(stage, "Timeout", f"no answer within {self.timeout_s:g}s "
                              f"(stage {stage}); worker killed", timed_out=True,
                              stderr_tail=_tail(worker.stderr_path))
        elif kind == "oom":
            failure = Failure(stage, "MemoryError", f"worker exceeded its memory cap of "
                              f"{self.memory_mb} MiB in stage {stage}",
                              stderr_tail=_tail(worker.stderr_path))
        else:
            worker.process.join(timeout=5)
            code = worker.process.exitcode
            sig = -code if code is not None and code < 0 else None
            name = signal.Signals(sig).name if sig else f"exit code {code}"
            failure = Failure(stage, name, f"worker died ({name}) in stage {stage}",
                              signal=sig, exit_code=code, stderr_tail=_tail(worker.stderr_path))
        return TargetResult(target=target, outputs=[], failure=failure,
                            stage_reached=stage)


def _kill(process: Any) -> None:
    if process.is_alive():
        process.kill()
        process.join(timeout=5)


def _tail(path: str) -> str:
    """The last words of a worker: its stderr, then what its current stage printed."""
    data = b""
    for part in (path, path + ".stage"):
        try:
            data += Path(part).read_bytes()
        except OSError:
            pass
    return data[-STDERR_TAIL_BYTES:].decode("utf-8", "replace")
