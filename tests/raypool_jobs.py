"""FAKE worker jobs for the Ray pool tests (a module of its own so that Ray
actors and their worker processes can import them by name): jobs that take
their time, or take down the Ray actor running them once, the way a lost node
does, and answer for real when run again."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fuzz.targets.cache import ArtifactCache
from fuzz.workers.execute import execute
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target


@dataclass(frozen=True)
class SlowJob:
    """Sleeps ``seconds``, then answers ``value``."""

    seconds: float
    value: int

    @property
    def target_name(self) -> str:
        return "fake-slow"

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:
        time.sleep(self.seconds)
        return self.value


@dataclass(frozen=True)
class StampedJob:
    """Sleeps ``seconds``; answers its (start, end) wall-clock times, so a test
    can see which jobs overlapped."""

    seconds: float

    @property
    def target_name(self) -> str:
        return "fake-stamped"

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:
        start = time.time()
        time.sleep(self.seconds)
        return start, time.time()


@dataclass(frozen=True)
class LosesItsActorOnce:
    """The first time (no ``marker`` file yet), sends ``signum`` to the Ray
    actor process that runs it (the worker's parent): SIGKILL is an actor
    that dies mid-job, SIGSTOP one that stops answering. Outside the worker
    pool's crash handling on purpose: the actor is lost, not the job. Any
    later run executes ``target`` on ``sample``."""

    target: Target
    sample: Sample
    marker: str
    signum: int = signal.SIGKILL

    @property
    def target_name(self) -> str:
        return self.target.name

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:
        marker = Path(self.marker)
        if not marker.exists():
            marker.write_text(str(os.getppid()))
            os.kill(os.getppid(), self.signum)
            time.sleep(1.0)
        return execute(self.target, self.sample, on_stage, cache)


@dataclass(frozen=True)
class KillsItsActor:
    """Kills the Ray actor that runs it, every time: a job no node survives."""

    @property
    def target_name(self) -> str:
        return "fake-node-killer"

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(5)


@dataclass(frozen=True)
class WhereAmI:
    """Answers the pid of the process that started its worker (the pool's
    owner: a Ray actor, or the coordinator itself for a job that runs here)."""

    runs_here: bool = False

    @property
    def target_name(self) -> str:
        return "fake-where"

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:
        return os.getppid()
