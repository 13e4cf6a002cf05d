"""The values that move between the engine and the oracles: which stage a
target reached, how the toolchain failed, and what a target produced.

Torch-free on purpose (numpy only): the oracles judge these values without
importing the engine, and the campaign process never needs torch to read them.
A failure is one value type from the stage that raised it, through the
artifact cache and the worker protocol, to the verdict.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Stage", "Failure", "TargetResult"]


class Stage(str, enum.Enum):
    """Where a (sample, target) job is: a failure names the stage it happened in.

    A ``str`` enum, so a stage still compares equal to its name in JSON and in
    the shared-memory slot a worker publishes it through."""

    START = "start"
    BUILD = "build"
    EXPORT = "export"
    IMPORT = "import"
    COMPILE = "compile"
    RUN = "run"
    NONE = "none"

    @classmethod
    def parse(cls, text: str) -> "Stage":
        """A stage from its name; an unknown name (an old corpus, a plugin's
        own stage label) becomes ``NONE`` rather than an error."""
        try:
            return cls(text)
        except ValueError:
            return cls.NONE

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Failure:
    """What the toolchain said when it failed: stage, exception type, its text.

    ``signal`` / ``exit_code`` are set when the worker process died (CRASH),
    ``timed_out`` when it was killed for exceeding its time limit, and
    ``program`` holds the input the failing stage choked on (for the report).
    ``owner`` names the component that failed when the pipeline knows it
    better than the stage does: an import failure in torch-mlir's shared
    prefix (FX import, Torch Backend contract) is the prefix's whichever
    output type was being built, so its bucket cannot depend on whether a
    ``torch`` output-type target happened to run beside it.
    """

    stage: Stage
    error_type: str
    message: str
    signal: int | None = None
    exit_code: int | None = None
    timed_out: bool = False
    stderr_tail: str = ""
    program: str | None = None
    owner: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.stage, Stage):
            object.__setattr__(self, "stage", Stage.parse(str(self.stage)))

    def to_dict(self) -> dict[str, Any]:
        """The failure as JSON (stage as text): the artifact cache stores failures like results."""
        out = dataclasses.asdict(self)
        out["stage"] = self.stage.value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Failure":
        """Read a cached failure back, ignoring fields this version does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class TargetResult:
    """One target's answer for one sample: an output per batch (``None`` where
    a static-shape target skipped a batch of another shape), or a failure."""

    target: str
    outputs: list[np.ndarray | None]
    failure: Failure | None = None
    stage_reached: Stage = Stage.NONE
    timings: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    compiles: int = 0
    # Extra weight seed -> an output per batch, from the same artifact.
    draws: dict[int, list[np.ndarray | None]] = field(default_factory=dict)
    # Per batch, what the float64 reference adds besides its output: how far
    # rounding in the model's dtype can move it (``oracles.compare``).
    roundings: list[np.ndarray | None] = field(default_factory=list)
