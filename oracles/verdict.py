"""Verdicts and outcomes: what one target did with one sample.

A verdict says which stage of the toolchain went wrong and how; an outcome
adds the evidence (first meaningful error line, numbers, stage timings) that
a triager or an upstream bug report needs. Lowering failures are split into
"unsupported op" (a missing lowering: torch-mlir knows it cannot) and
"invalid IR" (a lowering produced IR that does not verify: a real bug), since
the two get very different responses upstream.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from oracles.results import Stage

__all__ = ["Verdict", "Outcome"]


class Verdict(str, enum.Enum):
    """What happened to one (sample, target): a pass, a wrong answer, or where it failed."""
    PASS = "PASS"
    MISMATCH = "MISMATCH"
    EXPORT_ERROR = "EXPORT_ERROR"
    LOWERING_UNSUPPORTED_OP = "LOWERING_UNSUPPORTED_OP"
    LOWERING_INVALID_IR = "LOWERING_INVALID_IR"
    LOWERING_ERROR = "LOWERING_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    CRASH = "CRASH"
    TIMEOUT = "TIMEOUT"
    # A wrong answer that did not recur when the same program ran again:
    # nondeterministic (filed apart from MISMATCH, with the spread seen).
    FLAKY = "FLAKY"

    @property
    def is_failure(self) -> bool:
        """Everything but PASS is a failure to triage and store."""
        return self is not Verdict.PASS


@dataclass(frozen=True)
class Outcome:
    """One (sample, target) result, ready to store or print (no raw tensors)."""

    target: str
    verdict: Verdict
    stage: Stage
    error: str = ""
    detail: str = ""
    op: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The outcome as JSON-ready values (no tensors), to store or print."""
        return {
            "target": self.target,
            "verdict": self.verdict.value,
            "stage": Stage.parse(str(self.stage)).value,
            "error": self.error,
            "op": self.op,
            "numbers": self.numbers,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
        }
