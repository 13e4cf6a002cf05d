"""The FX road into torch-mlir's own reference backend: the linalg program
run by torch-mlir's ``refback-*`` passes and the MLIR ExecutionEngine
(``fuzz.targets.refbackend``), no IREE: a torch-mlir-only witness for blame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzz.targets.cache import ArtifactCache
from fuzz.targets.compiled import CompiledTarget, _Artifact
from fuzz.targets.pipeline import Timer
from fuzz.targets.refbackend import RefBackendModule, refbackend_available

__all__ = ["RefBackendTarget"]


@dataclass(frozen=True)
class RefBackendTarget(CompiledTarget):
    """... -> torch-mlir's own reference backend (refback passes, LLVM, MLIR
    ExecutionEngine): independent of IREE, so a wrong answer seen here and on
    IREE is torch-mlir's, and one seen only on IREE is IREE's."""

    @property
    def backend_owner(self) -> str:
        """One owner for the reference backend, apart from any IREE backend."""
        return "torch-mlir:refbackend"

    def availability(self) -> tuple[bool, str]:
        """Needs a torch-mlir wheel built with the refbackend passes and ExecutionEngine."""

        return refbackend_available()

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """Compile the lowered program with torch-mlir's refbackend (not cached)."""

        return _Artifact(mlir, timer.measure("compile", lambda: RefBackendModule(mlir)))
