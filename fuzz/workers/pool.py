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
from typing import Any

from fuzz.targets.cache import ArtifactCache
from fuzz.workers.interface import AnswerQueue, ExecuteJob, HarnessError, HarnessFault, Job, Pool
from fuzz.targets.pipeline import STAGE_LOG_ENV
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target
from oracles.results import Failure, Stage, TargetResult
from fuzz.targets.devices import ensure_runtime_environment

__all__ = ["Pool", "WorkerPool", "AnswerQueue", "HarnessError", "HarnessFault", "Job", "ExecuteJob",
           "STDERR_TAIL_BYTES"]

STDERR_TAIL_BYTES = 4096
_STAGE_BYTES = 32
_STARTUP_TIMEOUT_S = 300.0
_START_ATTEMPTS = 3  # tries to start a replacement worker before giving up
# How long a worker that answered an urgent job waits for the next urgent one
# before it takes a queued sample's: a shrink step's caller judges the answer
# and sends the next candidate within milliseconds, and a sample's compile
# started in between made that candidate wait seconds for it.
_LINGER_S = 0.2


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
    urgent: bool = False  # the job it runs was submitted urgent
    # After an urgent job, urgent jobs only until then (``_LINGER_S``).
    lingers_until: float = 0.0


class WorkerPool(AnswerQueue):
    """``size`` spawned workers. ``submit`` / ``completed`` keep them busy
    without a barrier (a caller feeds the next job as soon as one finishes);
    ``run(jobs)`` executes a list and returns one answer per job, in order.

    ``reserved`` more workers take urgent jobs only: a caller blocked on its
    own jobs (a shrink step, a report) then never waits for a compile some
    other job started first, however busy the other workers are."""

    def __init__(self, size: int, timeout_s: float = 120.0, memory_mb: int | None = 8192,
                 preload: bool = True, cache_dir: Path | None = None, cache_mb: int = 2048,
                 reserved: int = 0) -> None:
        if size < 1:
            raise ValueError(f"workers={size}: must be >= 1")
        if reserved < 0:
            raise ValueError(f"reserved={reserved}: must be >= 0")
        self.reserved = reserved
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.preload = preload
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self.cache_mb = cache_mb
        self._context = multiprocessing.get_context("spawn")
        self._log_dir = tempfile.mkdtemp(prefix="dlrm-fuzz-workers-")
        # Workers inherit this process's runtime folder (removed when it
        # exits) instead of each making one that a killed worker leaves behind.
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
            for _ in range(size + reserved):
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

    @property
    def free_slots(self) -> int:
        """Idle workers (a lingering one included: it waits for urgent jobs), at least one."""
        return max(1, sum(1 for worker in self._workers if worker.job is None))

    def _dispatch(self) -> None:
        first_reserved = len(self._workers) - self.reserved
        now = time.monotonic()
        urgent = set(self._urgent)
        for index, worker in enumerate(self._workers):
            if worker.job is None and self._queue:
                entry = self._take(self._queue, urgent_only=index >= first_reserved
                                   or now < worker.lingers_until)
                if entry is None:
                    continue
                ticket, job = entry
                worker.job, worker.work, worker.urgent = ticket, job, ticket in urgent
                worker.started = time.monotonic()
                worker.deadline = worker.started + self.timeout_s
                worker.conn.send((ticket, job))

    def _collect(self, until: float | None) -> list[tuple[int, Any]]:
        busy = [i for i, w in enumerate(self._workers) if w.job is not None]
        # A lingering worker takes the queued jobs once its linger ends.
        lingering = [w.lingers_until for w in self._workers
                     if w.job is None and w.lingers_until > time.monotonic()] if self._queue else []
        if not busy:
            if lingering:
                time.sleep(max(0.0, min([*lingering, *([until] if until is not None else [])])
                               - time.monotonic()))
            return []
        wait_until = min(self._workers[i].deadline for i in busy)
        if until is not None:
            wait_until = min(wait_until, until)
        if lingering:
            wait_until = min(wait_until, *lingering)
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
            if worker.urgent and kind in ("harness-error", "result"):
                # Its caller is blocked on its own jobs and sends the next in a
                # moment: a sample's compile started now would make it wait.
                worker.lingers_until = time.monotonic() + _LINGER_S
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
