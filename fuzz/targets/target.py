"""The ``Target`` interface every road and backend implements (``compile``
then ``run``, availability, the leading inputs a program takes before each
batch), its two bad-input errors, and the eager model as a target: the
reference every other target is judged against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache
from fuzz.targets.pipeline import Timer, memory_stage

__all__ = ["UnknownTarget", "UnavailableTarget", "Target", "EagerTarget"]


class UnknownTarget(ValueError):
    """A target name that is not in the table (nor added by a plugin)."""


class UnavailableTarget(ValueError):
    """A known target that cannot run on this machine (no device, no driver)."""


@dataclass(frozen=True)
class Target:
    """One way of running the model (eager, or a compiler and backend) that the fuzzer compares."""
    name: str
    description: str

    @property
    def any_shape(self) -> bool:
        """True when one artifact runs batches of every shape."""
        return True

    def availability(self) -> tuple[bool, str]:
        """(True, "") or (False, why not and how to enable it)."""
        return True, ""

    def leading_inputs(self, config: DLRMConfig, seed: int, timer: Timer) -> list[np.ndarray]:
        """Arrays the artifact takes before a batch's own (none by default)."""
        return []

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Build what ``run`` executes for ``config`` and ``seed``; a stage failure raises."""
        raise NotImplementedError

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Run a compiled artifact on one batch's flat inputs; returns its outputs as arrays."""
        raise NotImplementedError

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Compile any exportable module the way ``compile`` compiles the model
        (same export, lowering, flags and device), for ``run`` to call on flat
        inputs; ``run`` then returns every output. It lets ``fuzz.triage.localize``
        compile the model with its intermediates as extra outputs. Targets that
        cannot (eager, the crash fakes) keep this default."""
        raise NotImplementedError(f"target={self.name!r} does not compile arbitrary modules")

    @property
    def compiles_modules(self) -> bool:
        """Whether ``compile_module`` is implemented (localization needs it)."""
        return type(self).compile_module is not Target.compile_module

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Intermediate programs worth keeping with a finding (file name -> text)."""
        return {}

    def owner(self, stage: str) -> str:
        """Who is to blame when ``stage`` fails: one bug shared by several targets
        (a torch-mlir lowering used by every IREE backend) gets one owner."""
        return self.name

    @property
    def lowering_owner(self) -> str:
        """Who lowered the program this target's backend consumed: targets
        sharing it share the bugs of that lowering (see ``oracles.blame``)."""
        return self.name

    @property
    def program_group(self) -> str:
        """Targets in one group compile the same lowered program."""
        return self.name

    @property
    def import_group(self) -> str:
        """Targets in one group share one export and one import to Torch
        Backend IR (``CompiledTarget.lowered``), whatever their output type."""
        return self.program_group

    @property
    def compile_group(self) -> str:
        """Targets in one group compile one program to the same artifact
        (same backend and flags; only the runtime driver differs)."""
        return self.name


@dataclass(frozen=True)
class EagerTarget(Target):
    """Eager PyTorch: float32 is the baseline a compiler should match, float64 the reference."""

    dtype: str = "float32"

    def owner(self, stage: str) -> str:
        """Every failure of eager PyTorch is PyTorch's own, whatever the stage."""
        return "pytorch:eager"

    @property
    def lowering_owner(self) -> str:
        """Eager runs no lowering; PyTorch itself stands in for it in blame."""
        return "pytorch:eager"

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Eager has no compiler: building the model (float64 for the reference) is its compile."""
        from fuzz.model.dlrm import build, build_reference

        factory = build_reference if self.dtype == "float64" else build
        return timer.measure("build", lambda: memory_stage("build", lambda: factory(config, seed)))

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Forward pass in this dtype; the float64 reference also returns its rounding spread."""
        import torch

        from fuzz.model.dlrm import to_torch
        from fuzz.model.rounding import rounding_spread

        dtype = torch.float64 if self.dtype == "float64" else torch.float32

        def forward() -> list[np.ndarray]:
            with torch.inference_mode():
                args = to_torch(inputs, artifact.config, dtype)
                out = artifact(*args)
            if self.dtype != "float64":
                return [out.numpy().astype(np.float32)]
            # The reference also says how far rounding in the model's dtype
            # can move each output (oracles.compare; a second output).
            return [out.numpy().astype(np.float64), rounding_spread(artifact, *args).numpy()]

        return timer.measure("run", lambda: memory_stage("run", forward))
