"""The iree-turbine road: IREE's own PyTorch frontend. ``iree.turbine.aot.export``
does what a user's call does: ``torch.export.export(module, args,
dynamic_shapes, strict=True)`` (turbine's default), turbine's decomposition
table, then IREE's bundled copy of the FX importer into the torch dialect;
``iree-compile`` (torch input) lowers and compiles it for llvm-cpu.

Owners: the ``torch.export`` call is ``torch.export``'s; turbine's
decompositions and import are ``iree-turbine``'s; the compile and run are
IREE's torch-input backend's, the same owner as ``iree-torch``'s, so a
compile error both roads hit is one bucket. A wrong answer that only this road
computes (``oracles.blame``) is ``iree-turbine``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.compiled import _through_cache
from fuzz.targets.fx_iree import IreeTarget
from fuzz.targets.pipeline import StageFailure, Timer, run_stage
from fuzz.targets.versions import tool_versions

__all__ = ["TurbineIreeTarget", "TURBINE", "turbine_mlir"]

TURBINE = "iree-turbine"

# torch-mlir's torch-dialect lowering, which owns an op it cannot legalize.
TORCH_MLIR_TORCH = "torch-mlir:torch"
# An op without a torch-mlir lowering, as iree-compile's torch input says it
# (an ``onnx.*`` one is the ONNX road's: ``fuzz.targets.onnx_iree``).
_UNLOWERED = re.compile(r"failed to legalize operation 'torch\.operator'(?!.*name = \"onnx\.)")


def turbine_mlir(module: Any, args: tuple[Any, ...], dynamic_shapes: Any) -> str:
    """``aot.export(module, args=..., dynamic_shapes=...)`` in its two stages:
    turbine's ``torch.export`` call (export), then its decompositions and
    IREE's FX import (import); the torch-dialect MLIR text."""
    import torch

    try:
        exported = run_stage("export", lambda: torch.export.export(
            module, args, dynamic_shapes=dynamic_shapes, strict=True))
    except StageFailure:
        # Where the FX road's non-strict export fails as well, that failure is
        # the bug (one bucket for both roads); only a strict-only failure is
        # filed in turbine's own words.
        run_stage("export", lambda: torch.export.export(
            module, args, dynamic_shapes=dynamic_shapes, strict=False))
        raise

    def imported() -> str:
        from iree.turbine import aot
        from iree.turbine.aot import decompositions

        program = exported
        decomps = decompositions.current_aot_decompositions()
        if decomps:
            program = program.run_decompositions(decomps)
        return str(aot.export(program).mlir_module)

    return run_stage("import", imported)


@dataclass(frozen=True)
class TurbineIreeTarget(IreeTarget):
    """iree.turbine.aot.export -> iree-compile (torch input) ``backend`` -> IREE runtime."""

    output_type: str = "torch"

    def owner(self, stage: str) -> str:
        """torch.export's call, then turbine's import, then IREE's torch-input backend."""
        if stage in ("build", "export"):
            return "torch.export"
        if stage == "import":
            return TURBINE
        return self.backend_owner

    @property
    def lowering_owner(self) -> str:
        """IREE's torch input runs torch-mlir's TorchToLinalg, as for ``iree-torch``."""
        return "torch-mlir:linalg-on-tensors"

    @property
    def upstream(self) -> str:
        """The frontend before the lowering (``oracles.blame``: a wrong answer
        only turbine's targets compute is turbine's)."""
        return TURBINE

    @property
    def import_group(self) -> str:
        """turbine's own export and import, per shape mode."""
        return f"turbine|{'dynamic' if self.dynamic else 'static'}"

    @property
    def program_group(self) -> str:
        """One turbine program per shape mode."""
        return self.import_group

    def availability(self) -> tuple[bool, str]:
        """Needs iree-turbine (and its ``decorator`` dependency), then the backend."""
        import importlib.util

        # Found, not imported: importing turbine imports torch, which the
        # campaign process (where availability is asked) never needs.
        missing = [name for name in ("iree.turbine", "decorator")
                   if importlib.util.find_spec(name) is None]
        if missing:
            return False, (f"the iree-turbine road needs {' and '.join(missing)}: "
                           f"pip install -c constraints.txt iree-turbine")
        return super().availability()

    def lowered(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None) -> str:
        """The model through turbine, cached like the FX road's program."""
        from fuzz.model.recipe import recipe
        from fuzz.model.weights import weights_as_inputs

        shapes = "dynamic" if self.dynamic else [list(a.shape) for a in example]
        key = cache_key("turbine", config.to_dict(), None if weights_as_inputs(config) else seed,
                        shapes, tool_versions())

        def export() -> str:
            module, args, spec = recipe(config, seed, self.dynamic, example, timer.measure)
            return timer.measure("import", lambda: turbine_mlir(module, args, spec))

        mlir = _through_cache(cache, key, export)
        assert isinstance(mlir, str)
        return mlir

    def lower_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                     timer: Timer) -> str:
        """Any module by the same road (localization's instrumented program)."""
        return timer.measure("import", lambda: turbine_mlir(module, example_args, dynamic_shapes))

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """IREE's compile; a ``torch.operator`` (an op torch-mlir has no
        lowering for) that IREE's torch input could not legalize is filed as
        the FX road files it: torch-mlir's, at the lowering (on that road
        torch-mlir's own import refuses it before IREE sees it), so one
        missing lowering is one bucket on both roads."""
        try:
            return super().compile_program(mlir, timer, cache)
        except StageFailure as failure:
            if failure.stage.value != "compile" or not _UNLOWERED.search(failure.message):
                raise
            raise failure.refiled("import", owner=TORCH_MLIR_TORCH) from failure

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Keep the torch-dialect program turbine produced."""
        return {"turbine-torch.mlir": artifact.mlir}
