"""Workers as Ray actors across machines (``dlrm-fuzz run --ray ADDRESS``): a
drop-in for ``fuzz.workers.pool.WorkerPool`` while the coordinator keeps
generation, dedup, shrinking and the corpus.

This module is the pool's dispatch: it queues jobs by the kind of actor they
need (GPU or not; ``fuzz.workers.rayactor`` says which, and what an actor
is), hands them to idle actors, collects the answers, and survives losing
actors. An actor that dies (its node lost, its process killed, no answer long
after the job's own time limit) is no finding: its job goes to another actor,
up to ``MAX_ATTEMPTS`` times, and the actor is replaced when the cluster has
room; the run goes on with the actors left. Jobs that write the corpus run
here, in a local worker. Connecting to the cluster and Ray's errors are
``fuzz.workers.raycluster``'s. Ray is imported lazily: the base install has
none (``pip install 'dlrm-fuzz[ray]'``).
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from fuzz.targets.catalog import Target
from fuzz.targets.versions import tool_versions
from fuzz.workers.interface import AnswerQueue, ExecuteJob, HarnessError, HarnessFault, Job
from fuzz.workers.pool import WorkerPool
from fuzz.workers.rayactor import (actor_class, check_gpu_workers, job_target, needs_gpu, owned,
                                   runs_here)
from fuzz.workers.raycluster import (ClusterLost, RayUnavailable, check_room, connect, first_line,
                                     last_line, ray_module, unwrapped)

__all__ = ["RayPool", "RayUnavailable", "ClusterLost", "needs_gpu", "runs_here", "check_gpu_workers", "MAX_ATTEMPTS",
           "GRACE_S"]

MAX_ATTEMPTS = 3  # actors a job may lose before it is a harness error
GRACE_S = 60.0  # beyond the job's own time limit, before its actor is presumed lost
_STARTUP_TIMEOUT_S = 300.0
_SLICE_S = 0.25

_log = logging.getLogger(__name__)


@dataclass
class _Actor:
    handle: Any
    gpu: bool
    ready: Any  # the ObjectRef of ``hello`` until the actor has answered it
    born: float
    where: str = ""
    ticket: int | None = None  # the job it runs
    job: Job | None = None
    attempts: int = 0
    ref: Any = None
    started: float = 0.0
    deadline: float = 0.0


class RayPool(AnswerQueue):
    """``size`` CPU actors (``num_cpus=1`` each) and ``gpu_workers`` GPU actors
    (``num_cpus=1, num_gpus=1``) on the Ray cluster at ``address``: "auto" (the
    one ``ray start`` made on this machine), "HOST:PORT", or "local" (a
    cluster of this process, shut down by ``close``). When this process is
    already connected to Ray, that connection is used and left open. Same
    interface as ``WorkerPool``: ``submit`` / ``completed`` / ``run``,
    ``slots``, ``pending``, ``replaced``, ``busy_s``."""

    def __init__(self, size: int, timeout_s: float = 120.0, memory_mb: int | None = 8192,
                 preload: bool = True, cache_dir: Path | None = None, cache_mb: int = 2048,
                 address: str = "auto", gpu_workers: int = 0, grace_s: float = GRACE_S) -> None:
        if size < 1:
            raise ValueError(f"workers={size}: must be >= 1")
        if gpu_workers < 0:
            raise ValueError(f"gpu_workers={gpu_workers}: must be >= 0")
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.address = address
        self.gpu_workers = gpu_workers
        self.memory_mb, self.preload, self.cache_dir, self.cache_mb = (memory_mb, preload,
                                                                      cache_dir, cache_mb)
        self._args = (timeout_s, memory_mb, preload,
                      str(cache_dir) if cache_dir is not None else None, cache_mb)
        self.replaced = 0
        self.busy_s = 0.0
        self.lost: list[str] = []  # why each lost actor was lost, for the log and the report
        self._tickets = 0
        self._ready: list[tuple[int, Any]] = []
        self._after: dict[int, int] = {}
        self._urgent: set[int] = set()
        self._queues: dict[bool, collections.deque[tuple[int, Job, int]]] = {
            False: collections.deque(), True: collections.deque()}
        self._actors: list[_Actor] = []
        self._failed_starts = 0
        # Jobs that must run here: a local one-worker pool, started when first needed.
        self._here: WorkerPool | None = None
        self._here_tickets: dict[int, int] = {}  # its ticket -> ours
        self.ran_here = 0
        self._ray = ray_module()
        # True when this pool called ray.init: it then calls ray.shutdown.
        self._connected = connect(self._ray, address, size + gpu_workers)
        try:
            check_room(self._ray, address, size, gpu_workers)
            for gpu in [False] * size + [True] * gpu_workers:
                self._start(gpu)
            self._await_ready()
        except BaseException:
            self.close()
            raise

    # -- lifecycle ---------------------------------------------------------
    def _start(self, gpu: bool) -> None:
        options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0}
        if gpu:
            options["num_gpus"] = 1
        handle = actor_class().options(**options).remote(*self._args)
        self._actors.append(_Actor(handle, gpu, handle.hello.remote(), time.monotonic()))

    def _await_ready(self) -> None:
        """Every actor started (imports done) before the first job, as ``WorkerPool`` does."""
        waiting = [a for a in self._actors if a.ready is not None]
        refs = [a.ready for a in waiting]
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        done: list[Any] = []
        while len(done) < len(refs) and time.monotonic() < deadline:  # in slices, as in _collect
            done, _ = unwrapped(self._ray.wait, refs, num_returns=len(refs), timeout=_SLICE_S)
        if len(done) < len(refs):
            raise RayUnavailable(f"{len(refs) - len(done)} of {len(refs)} Ray workers did not "
                                 f"start within {_STARTUP_TIMEOUT_S:.0f}s at {self.address} "
                                 f"(`ray status` shows what the cluster has)")
        for actor in waiting:
            try:
                self._greet(actor, self._ray.get(actor.ready))
            except self._ray.exceptions.RayError as exc:
                raise HarnessError(f"a Ray worker failed to start at {self.address}: "
                                   f"{last_line(exc)}") from exc

    def _greet(self, actor: _Actor, hello: dict[str, Any]) -> None:
        here = tool_versions()
        if hello["versions"] != here:
            diff = ", ".join(f"{k} {hello['versions'].get(k)} there, {v} here"
                             for k, v in here.items() if hello["versions"].get(k) != v)
            raise RayUnavailable(f"Ray node {hello['host']} has another toolchain ({diff}): "
                                 f"every node needs the same dlrm-fuzz install")
        actor.ready = None
        actor.where = f"{hello['host']}:{hello['pid']}"

    def _kill(self, actor: _Actor) -> None:
        try:
            self._ray.kill(actor.handle, no_restart=True)
        except Exception:  # already gone with its node
            pass

    def close(self) -> None:
        """Stop every actor (and its worker process, which may be deep in a
        compile); disconnect from Ray if this pool connected, which shuts down
        a cluster it started itself (``address="local"``) and no other."""
        ray = self._ray
        actors, self._actors = self._actors, []
        if actors and ray.is_initialized():
            stops = [a.handle.stop.remote() for a in actors if a.ready is None]
            try:
                ray.wait(stops, num_returns=len(stops), timeout=5)
            except Exception:
                pass
            for actor in actors:
                self._kill(actor)
        for queue in self._queues.values():
            queue.clear()
        if self._here is not None:
            self._here.close()
            self._here = None
            self._here_tickets.clear()
        if self._connected:
            self._connected = False
            ray.shutdown()

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running -----------------------------------------------------------
    @property
    def slots(self) -> int:
        """Jobs that run at once: actors started and not lost (at least one,
        so a caller keeps feeding a pool whose replacements are starting)."""
        return max(1, sum(a.ready is None for a in self._actors))

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet answered (queued, running or resubmitted)."""
        return (sum(map(len, self._queues.values())) + len(self._ready)
                + sum(a.ticket is not None for a in self._actors) + len(self._here_tickets))

    def submit(self, job: Job | tuple[Target, Any], after: int | None = None,
               urgent: bool = False) -> int:
        """Queue one job (a ``(target, sample)`` pair is an ``ExecuteJob``) and
        start it if an actor of its kind (GPU or not) is idle; ``after`` as in
        ``WorkerPool.submit``."""
        work: Job = ExecuteJob(*job) if isinstance(job, tuple) else job
        if runs_here(work):
            if self._here is None:
                self._here = WorkerPool(1, self.timeout_s, self.memory_mb, self.preload,
                                        self.cache_dir, self.cache_mb)
            self._tickets += 1
            self._here_tickets[self._here.submit(work, urgent=urgent)] = self._tickets
            self.ran_here += 1
            return self._tickets
        target = job_target(work)
        gpu = target is not None and needs_gpu(target)
        if gpu:
            assert target is not None
            check_gpu_workers([target], self.gpu_workers)
        self._tickets += 1
        self._enqueue(self._queues[gpu], (self._tickets, work, 0), urgent)
        self._wait_for(self._tickets, after)
        self._dispatch()
        return self._tickets

    def cancel(self, tickets: Iterable[int]) -> set[int]:
        """As ``WorkerPool.cancel``, for the actors' queues and the jobs that run here."""
        wanted = set(tickets)
        dropped = super().cancel(wanted)
        if self._here is not None:
            ours = {theirs: ticket for theirs, ticket in self._here_tickets.items()
                    if ticket in wanted}
            for theirs in self._here.cancel(ours):
                dropped.add(self._here_tickets.pop(theirs))
        return dropped

    def _queues_to_cancel(self) -> "list[collections.deque[Any]]":
        return list(self._queues.values())

    def _open_tickets(self) -> set[int]:
        return {entry[0] for queue in self._queues.values() for entry in queue} | \
            {a.ticket for a in self._actors if a.ticket is not None} | \
            set(self._here_tickets.values())

    def _dispatch(self) -> None:
        for actor in self._actors:
            queue = self._queues[actor.gpu]
            if actor.ready is None and actor.ticket is None and queue:
                entry = self._take(queue)
                if entry is None:
                    continue
                actor.ticket, actor.job, actor.attempts = entry
                actor.started = time.monotonic()
                actor.deadline = actor.started + self.timeout_s + self.grace_s
                actor.ref = actor.handle.run.remote(actor.job)

    def _collect(self, until: float | None) -> list[tuple[int, Any]]:
        ray = self._ray
        self._check_starved()
        busy = [a for a in self._actors if a.ticket is not None]
        starting = [a for a in self._actors if a.ready is not None]
        refs = [a.ref for a in busy] + [a.ready for a in starting]
        if not refs and not self._here_tickets:
            return []
        # Wake up for a lost actor's deadline, and when a starting actor has
        # waited its start-up limit (``_check_starved`` then decides).
        now = time.monotonic()
        limits = [a.born + _STARTUP_TIMEOUT_S for a in starting]
        wait_until = min([a.deadline for a in busy] + [t for t in limits if t > now] + [now + 30.0])
        if until is not None:
            wait_until = min(wait_until, until)
        # In slices: a stop signal (Ctrl-C) is acted on between Ray calls, not
        # inside one (ray.wait returns to Python only at its timeout).
        ready: list[Any] = []
        done: list[tuple[int, Any]] = []
        while True:
            left = wait_until - time.monotonic()
            step = max(0.0, min(left, _SLICE_S))
            if refs:
                ready, _ = unwrapped(ray.wait, refs, num_returns=1, timeout=step)
            if self._here_tickets:
                done += self._collect_here(0.0 if refs else step)
            if ready or done or left <= _SLICE_S:
                break
        if ready:
            ready, _ = unwrapped(ray.wait, refs, num_returns=len(refs), timeout=0)
        finished = set(ready)
        for actor in starting:
            if actor.ready in finished:
                self._started(actor)
        for actor in busy:
            if actor.ref in finished:
                answer = self._answer(actor)
                if answer is not None:
                    done.append(answer)
            elif time.monotonic() >= actor.deadline:
                self._lost(actor, f"no answer within {self.timeout_s + self.grace_s:g}s "
                                  f"(the job's limit {self.timeout_s:g}s + {self.grace_s:g}s)")
        return done

    def _collect_here(self, timeout: float) -> list[tuple[int, Any]]:
        """Answers of the jobs run on this machine, under our tickets."""
        here = self._here
        assert here is not None
        busy, replaced = here.busy_s, here.replaced
        done = [(self._here_tickets.pop(t), a) for t, a in here.completed(timeout=timeout)]
        self.busy_s += here.busy_s - busy
        self.replaced += here.replaced - replaced
        return done

    def _started(self, actor: _Actor) -> None:
        try:
            self._greet(actor, self._ray.get(actor.ready))
            self._failed_starts = 0
        except self._ray.exceptions.RayError as exc:
            # Its node died while it started, or it cannot start there at all.
            self._actors.remove(actor)
            self._failed_starts += 1
            if self._failed_starts > MAX_ATTEMPTS:
                raise ClusterLost(f"Ray workers keep failing to start ({self._failed_starts} in "
                                   f"a row): {last_line(exc)}") from exc
            _log.warning("a Ray worker failed to start (%s); starting another", last_line(exc))
            self._start(actor.gpu)

    def _answer(self, actor: _Actor) -> tuple[int, Any] | None:
        ray = self._ray
        ticket, job = actor.ticket, actor.job
        assert ticket is not None and job is not None
        lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                ray.exceptions.LocalRayletDiedError, ray.exceptions.RaySystemError,
                ray.exceptions.OutOfMemoryError)  # Ray's memory monitor took the actor
        try:
            kind, payload, seconds = unwrapped(ray.get, actor.ref)
        except lost as exc:
            self._lost(actor, f"{type(exc).__name__}: {first_line(exc)}")
            return None
        except ray.exceptions.RayTaskError as exc:
            raise HarnessError(f"bug in dlrm-fuzz's Ray worker while running {job.target_name}: "
                               f"{first_line(exc)}") from exc
        self.busy_s += seconds
        actor.ticket = actor.job = actor.ref = None
        if kind == "harness-error":  # the actor lives on; the answer says what broke
            return ticket, HarnessFault(job.target_name, str(payload))
        return ticket, owned(payload)

    def _lost(self, actor: _Actor, why: str) -> None:
        """Its job goes back to the front of the queue for another actor; a
        new actor takes its place when the cluster has room."""
        ticket, job = actor.ticket, actor.job
        assert ticket is not None and job is not None
        self.busy_s += time.monotonic() - actor.started
        self._kill(actor)
        self._actors.remove(actor)
        attempts = actor.attempts + 1
        message = f"Ray worker {actor.where} lost while running {job.target_name} ({why})"
        self.lost.append(message)
        self.replaced += 1
        self._start(actor.gpu)
        if attempts >= MAX_ATTEMPTS:
            raise ClusterLost(f"{message}; the job lost {attempts} workers, giving up on it")
        _log.warning("%s; running the job again elsewhere (attempt %d)", message, attempts + 1)
        self._queues[actor.gpu].appendleft((ticket, job, attempts))

    def _check_starved(self) -> None:
        """Jobs of a kind with no started actor, whose replacements have not
        started for the start-up limit: the cluster has no room left for them."""
        now = time.monotonic()
        for gpu, queue in self._queues.items():
            kind = [a for a in self._actors if a.gpu == gpu]
            if not queue or any(a.ready is None for a in kind):
                continue
            if not kind or all(now - a.born > _STARTUP_TIMEOUT_S for a in kind):
                raise ClusterLost(f"{len(queue)} {'GPU' if gpu else 'CPU'} jobs wait, and no Ray "
                                   f"worker could start for {_STARTUP_TIMEOUT_S:.0f}s: the "
                                   f"cluster at {self.address} lost the nodes to run them "
                                   f"(`ray status`)")
