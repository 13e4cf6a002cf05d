"""One Ray actor of the Ray pool (``fuzz.workers.raypool``) and which jobs go
to which actor.

An actor owns a one-worker local ``WorkerPool`` on its node and runs every
job through it, so a compiler that segfaults, aborts, hangs or eats memory is
the same CRASH / TIMEOUT finding as on one machine and the actor itself
survives it. Jobs whose target needs a real GPU run on actors that reserve
one (``needs_gpu``); jobs that read or write this machine's files run on the
coordinator (``runs_here``). What an actor hands back is made this process's
own again (``owned``). Ray is imported only when the actor class is made.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fuzz.targets.catalog import TARGETS, Target
from fuzz.targets.versions import tool_versions
from fuzz.workers.interface import HarnessError, Job
from fuzz.workers.pool import WorkerPool
from fuzz.workers.raycluster import RayUnavailable, ray_module
from oracles.results import TargetResult

__all__ = ["PoolActor", "actor_class", "needs_gpu", "check_gpu_workers", "runs_here", "job_target",
           "owned"]


def needs_gpu(target: Target) -> bool:
    """Whether ``target`` runs only on a real GPU (CUDA or HIP), hence on an
    actor reserving one. Vulkan is not: lavapipe gives every CPU node a Vulkan
    device, so a Vulkan target checks what the node it lands on has."""
    backend, driver = getattr(target, "backend", None), getattr(target, "driver", None)
    return backend in ("cuda", "rocm") or driver in ("cuda", "hip")


def check_gpu_workers(targets: Sequence[Target], gpu_workers: int) -> None:
    """A one-line error when a GPU target would have no actor to run on."""
    gpu = [t.name for t in targets if needs_gpu(t)]
    if gpu and gpu_workers < 1:
        raise RayUnavailable(f"target={gpu[0]!r} needs a GPU but gpu_workers={gpu_workers}: "
                             f"reserve GPU actors with --ray-gpu-workers N")


def runs_here(job: Job) -> bool:
    """Whether ``job`` reads or writes this machine's files (the corpus), so
    that it must run on the coordinator, not on whichever node is free: a job
    saying so with a true ``runs_here`` attribute, such as a ``BugReportJob``
    (repro.py, tool files). An attribute, not a type check: reports sit above
    workers."""
    return bool(getattr(job, "runs_here", False))


def job_target(job: Job) -> Target | None:
    """The target a job runs on (its own, or the catalog's by name), to place it."""
    target = getattr(job, "target", None)
    return target if isinstance(target, Target) else TARGETS.get(job.target_name)


class PoolActor:
    """One Ray actor: a one-worker ``WorkerPool`` on its node (made a Ray
    actor class by ``actor_class``, so this module imports without Ray)."""

    def __init__(self, timeout_s: float, memory_mb: int | None, preload: bool,
                 cache_dir: str | None, cache_mb: int) -> None:
        self._pool = WorkerPool(1, timeout_s, memory_mb, preload,
                                Path(cache_dir) if cache_dir else None, cache_mb)

    def hello(self) -> dict[str, Any]:
        """Who and where: checked by the coordinator (one toolchain everywhere)."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "versions": tool_versions()}

    def run(self, job: Job) -> tuple[str, Any, float]:
        """Run one job in the actor's worker: its answer (or the harness
        error, which the actor survives) and the seconds it took."""
        began = time.monotonic()
        try:
            answer = self._pool.run([job])[0]
        except HarnessError as exc:
            return "harness-error", str(exc), time.monotonic() - began
        return "result", answer, time.monotonic() - began

    def stop(self) -> None:
        """Kill the worker process (it may be deep in a compile): an actor
        killed by Ray would leave it running as an orphan."""
        for child in multiprocessing.active_children():
            child.kill()


_ACTOR_CLASS: Any = None


def actor_class() -> Any:
    """``PoolActor`` as a Ray actor class, made once, on first use."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        # Two threads: ``stop`` must get through while ``run`` waits on a job.
        _ACTOR_CLASS = ray_module().remote(max_concurrency=2)(PoolActor)
    return _ACTOR_CLASS


def owned(answer: Any) -> Any:
    """A result's arrays in this process's own writable memory, as the local
    pool gives them: Ray hands back read-only views of its object store."""
    if isinstance(answer, TargetResult):
        answer.outputs = [out if out is None or out.flags.writeable else np.array(out)
                          for out in answer.outputs]
    return answer
