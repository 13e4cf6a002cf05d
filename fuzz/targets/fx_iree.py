"""The FX road into IREE: a program lowered by torch-mlir, compiled by
``iree-compile`` for one backend and run by the IREE runtime on one driver
(``IreeTarget``), and the Vulkan flavour that needs a device and copies
results back through a staging buffer (``VulkanTarget``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.compiled import CompiledTarget, _Artifact, _through_cache
from fuzz.targets.pipeline import Timer
from fuzz.targets.versions import tool_versions
from fuzz.targets.devices import device_availability
from fuzz.targets import pipeline
from fuzz.targets.vulkan import prepare_for_vulkan

__all__ = ["IreeTarget", "VulkanTarget"]


@dataclass(frozen=True)
class IreeTarget(CompiledTarget):
    """... -> IREE compiler ``backend`` with ``flags`` -> IREE runtime ``driver``."""

    backend: str = "llvm-cpu"
    driver: str = "local-task"
    flags: tuple[str, ...] = ()

    @property
    def backend_owner(self) -> str:
        """``iree:<backend>``, naming the input type when it is not linalg: IREE
        then runs its own input conversion, a component of its own."""
        if self.output_type == "linalg-on-tensors":
            return f"iree:{self.backend}"
        return f"iree:{self.backend}({self.output_type} input)"

    @property
    def lowering_owner(self) -> str:
        """Who lowered what IREE compiled; for torch input, TorchToLinalg run inside IREE."""
        # IREE's torch input conversion runs torch-mlir's TorchToLinalg inside
        # IREE: a fault of that lowering shows up here too, as the same error.
        if self.output_type == "torch":
            return "torch-mlir:linalg-on-tensors"
        return f"torch-mlir:{self.output_type}"

    def availability(self) -> tuple[bool, str]:
        """Needs the backend in the installed IREE compiler and a device for the driver."""
        if self.backend not in _compiler_backends():
            return False, (f"the installed IREE compiler has no '{self.backend}' backend; "
                           f"install an iree-base-compiler build that includes it")

        return device_availability(self.driver)

    def prepare(self, mlir: str) -> tuple[str, tuple[str, ...]]:
        """The program and flags actually handed to the IREE compiler."""
        return mlir, self.flags

    @property
    def compile_group(self) -> str:
        """The vmfb cache key (program, backend, flags): drivers of one compile share it."""
        # The vmfb cache key is (program, backend, flags): iree-cpu and
        # iree-cpu-sync share one compile.
        return "|".join([self.program_group, self.backend, *self.flags])

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """Compile to a vmfb (cached by source, backend, flags, versions) and load it."""

        source, flags = self.prepare(mlir)
        key = cache_key("vmfb", cache_key(source), self.backend, list(flags), tool_versions())
        vmfb = _through_cache(cache, key, lambda: timer.measure(
            "compile", lambda: pipeline.compile_vmfb(source, self.backend, flags)))
        assert isinstance(vmfb, bytes)
        module = timer.measure("run", lambda: pipeline.LoadedModule(vmfb, self.driver))
        return _Artifact(source, module)


@dataclass(frozen=True)
class VulkanTarget(IreeTarget):
    """IREE ``vulkan-spirv`` compiled for a description of the Vulkan device
    present (lavapipe or a real GPU; see ``fuzz.targets.vulkan``), or, with
    ``describe_device=False``, for IREE's default Vulkan target: the class of
    mobile GPUs without native int64, where IREE emulates 64-bit integers with
    pairs of 32-bit ones (a code path of its own, run on whatever device is here)."""

    backend: str = "vulkan-spirv"
    driver: str = "vulkan"
    describe_device: bool = True

    @property
    def compile_group(self) -> str:
        """The device description added by ``prepare`` is part of what gets compiled."""
        # The device description ``prepare`` adds is part of what is compiled.
        return f"{super().compile_group}|described={self.describe_device}"

    def prepare(self, mlir: str) -> tuple[str, tuple[str, ...]]:
        """Target the Vulkan device present, unless IREE's default target was asked for."""
        if not self.describe_device:
            return mlir, self.flags

        return prepare_for_vulkan(mlir, self.flags)


@functools.lru_cache(maxsize=1)
def _compiler_backends() -> frozenset[str]:
    try:
        from iree.compiler import query_available_targets

        return frozenset(query_available_targets())
    except Exception:  # an old compiler without the query: assume the usual set
        return frozenset({"llvm-cpu", "vmvx", "vulkan-spirv", "cuda", "rocm", "metal-spirv"})
