"""The targets a DLRM sample is checked on, declared in one visible table.

A target is a named pipeline split like torch-mlir's e2e ``TestConfig``:
``compile(config, seed, example_inputs) -> artifact`` then
``run(artifact, inputs) -> outputs``. An artifact is never mutated, so one
compile serves every input batch of its shape. The eager model (float32) and
its float64 twin are targets like any other; ``fake-*`` targets misbehave on
purpose (segfault, abort, hang, memory blow-up) and exist only to test the
engine's own crash and timeout handling.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from fuzz.config import DLRMConfig
from fuzz.pipeline import StageFailure, Timer

__all__ = ["Target", "EagerTarget", "IreeTarget", "FakeTarget", "TARGETS", "FAKE_TARGETS",
           "UnknownTarget", "resolve_targets", "DEFAULT_TARGETS", "REFERENCE", "EAGER"]


class UnknownTarget(ValueError):
    """A target name that is not in the table."""


@dataclass(frozen=True)
class Target:
    name: str
    description: str

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer) -> Any:
        raise NotImplementedError

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        raise NotImplementedError

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Intermediate programs worth keeping with a finding (file name -> text)."""
        return {}

    def owner(self, stage: str) -> str:
        """Who is to blame when ``stage`` fails: one bug shared by several targets
        (a torch-mlir lowering used by every IREE backend) gets one owner."""
        return self.name


@dataclass(frozen=True)
class EagerTarget(Target):
    """Eager PyTorch: float32 is the baseline a compiler should match, float64 the reference."""

    dtype: str = "float32"

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer) -> Any:
        from fuzz.model import build, build_reference

        factory = build_reference if self.dtype == "float64" else build
        return timer.measure("build", lambda: factory(config, seed))

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        import torch

        from fuzz.model import to_torch

        dtype = torch.float64 if self.dtype == "float64" else torch.float32

        def forward() -> list[np.ndarray]:
            with torch.inference_mode():
                out = artifact(*to_torch(inputs, artifact.config.num_tables, dtype))
            return [out.numpy().astype(np.float64 if self.dtype == "float64" else np.float32)]

        return timer.measure("run", forward)


@dataclass(frozen=True)
class IreeTarget(Target):
    """torch.export -> torch-mlir (``output_type``) -> IREE ``backend`` -> ``driver``."""

    output_type: str = "linalg-on-tensors"
    backend: str = "llvm-cpu"
    driver: str = "local-task"
    flags: tuple[str, ...] = ()

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer) -> Any:
        from fuzz import pipeline
        from fuzz.model import build, to_torch

        model = timer.measure("build", lambda: build(config, seed))
        args = to_torch(example, config.num_tables)
        exported = timer.measure("export", lambda: pipeline.export(model, args))
        mlir = timer.measure("import", lambda: pipeline.lower(exported, self.output_type))
        vmfb = timer.measure("compile", lambda: pipeline.compile_vmfb(mlir, self.backend, self.flags))
        loaded = timer.measure("run", lambda: pipeline.LoadedModule(vmfb, self.driver))
        return _IreeArtifact(mlir=mlir, vmfb=vmfb, module=loaded)

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        return timer.measure("run", lambda: artifact.module(inputs))

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        return {f"{self.output_type}.mlir": artifact.mlir}

    def owner(self, stage: str) -> str:
        if stage in ("build", "export"):
            return "torch.export"
        if stage == "import":
            return f"torch-mlir:{self.output_type}"
        return self.name


@dataclass(frozen=True)
class _IreeArtifact:
    mlir: str
    vmfb: bytes
    module: Any = field(compare=False)


@dataclass(frozen=True)
class FakeTarget(Target):
    """FAKE, for engine tests only: misbehaves the way a broken compiler can.

    ``behaviour`` is one of segfault, abort, hang, oom, raise, ok; it acts at
    compile time, when real compilers usually die.
    """

    behaviour: str = "ok"

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer) -> Any:
        return timer.measure("compile", self._misbehave)

    def _misbehave(self) -> None:
        if self.behaviour == "segfault":
            import ctypes

            ctypes.string_at(0)
        elif self.behaviour == "abort":
            os.kill(os.getpid(), signal.SIGABRT)
        elif self.behaviour == "hang":
            while True:
                time.sleep(1)
        elif self.behaviour == "oom":
            hog = []
            while True:
                hog.append(bytearray(256 * 1024 * 1024))
        elif self.behaviour == "raise":
            raise StageFailure("compile", "FakeCompilerError", "fake-raise: error: deliberate failure")

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        batch = inputs[0].shape[0]
        return [np.zeros((batch, 1), dtype=np.float32)]


_CPU_FLAGS = ("--iree-llvmcpu-target-cpu=host",)

# The one table of real targets. Later targets (GPU, other importers) join here.
TARGETS: dict[str, Target] = {t.name: t for t in (
    EagerTarget("eager-f64", "eager PyTorch in float64: the reference", dtype="float64"),
    EagerTarget("eager", "eager PyTorch in float32: the baseline precision"),
    IreeTarget("iree-cpu", "torch-mlir linalg-on-tensors -> IREE llvm-cpu -> local-task",
               output_type="linalg-on-tensors", backend="llvm-cpu", driver="local-task",
               flags=_CPU_FLAGS),
)}

# Engine-test targets: never in a default run, only when named.
FAKE_TARGETS: dict[str, Target] = {t.name: t for t in (
    FakeTarget(f"fake-{b}", f"FAKE target for engine tests: {b}", behaviour=b)
    for b in ("segfault", "abort", "hang", "oom", "raise", "ok")
)}

REFERENCE = "eager-f64"
EAGER = "eager"
DEFAULT_TARGETS = ("iree-cpu",)


def resolve_targets(names: Sequence[str]) -> list[Target]:
    """Targets by name; an unknown name is a one-line error listing the known ones."""
    resolved = []
    for name in names:
        target = TARGETS.get(name) or FAKE_TARGETS.get(name)
        if target is None:
            raise UnknownTarget(f"target={name!r}: unknown; choose from "
                                f"{', '.join(sorted(TARGETS))} (see `dlrm-fuzz targets`)")
        resolved.append(target)
    return resolved
