"""The ONNX road into IREE: the sample's ``model.onnx`` (``fuzz.targets.onnx_export``)
imported by ``iree-import-onnx`` (torch-mlir's ONNX importer, as IREE ships it:
``onnx.*`` ops as ``torch.operator``), then ``iree-compile``, whose torch input
conversion runs torch-mlir's ``TorchOnnxToTorch`` before the rest of its
pipeline, for llvm-cpu, vmvx or Vulkan (``OnnxIreeTarget``, ``OnnxVulkanTarget``).

Owners: the export is ``torch.onnx``'s, the import and an ``onnx.*`` op that
``iree-compile`` could not convert are ``torch-mlir:onnx``'s (such a compile
failure is filed as the import's: the same fault torch-mlir's own ONNX
importer shows on ``onnx-refbackend``, so one bucket whichever ran), the rest
of the compile and the run are the IREE backend's.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.compiled import _Artifact, _through_cache
from fuzz.targets.fx_iree import IreeTarget, VulkanTarget
from fuzz.targets.onnx_export import ONNX_IMPORT, OnnxLowered, onnx_model
from fuzz.targets.pipeline import StageFailure, Timer, run_stage
from fuzz.targets.versions import tool_versions

__all__ = ["ONNX_IMPORT", "OnnxIreeTarget", "OnnxVulkanTarget", "import_onnx", "entry_as_main",
           "unconverted_onnx_op", "OnnxRoad", "run_importer"]

# An ``onnx.*`` op that TorchOnnxToTorch left unconverted, as iree-compile says it.
_UNCONVERTED = re.compile(r"failed to legalize operation 'torch\.operator'.*name = \"onnx\.")


def unconverted_onnx_op(message: str) -> bool:
    """Whether a compile failure is an ``onnx.*`` op TorchOnnxToTorch could not convert."""
    return bool(_UNCONVERTED.search(message))


# The exporter names the graph (so the imported function) ``main_graph``;
# every compiled target's program is called as ``main``.
_GRAPH_FUNC = re.compile(r"func\.func @main_graph\(")


def entry_as_main(mlir: str) -> str:
    """The imported program with its function named ``main``, as every target's is."""
    return _GRAPH_FUNC.sub("func.func @main(", mlir, count=1)


def import_onnx(model: bytes) -> str:
    """``iree-import-onnx model.onnx -o model.mlir``, in this process (its
    ``main``, with its defaults: shape inference, no externalized weights);
    the function renamed ``main`` (``entry_as_main``)."""
    from iree.compiler.tools.import_onnx.__main__ import main, parse_arguments

    return run_importer(model, lambda argv: main(parse_arguments(argv)))


def run_importer(model: bytes, tool: Callable[[list[str]], object]) -> str:
    """An ONNX import tool's ``main`` (``["model.onnx", "-o", "model.mlir"]``)
    on ``model`` in a temporary folder, as the import stage; its output with
    the function renamed ``main``."""
    with tempfile.TemporaryDirectory(prefix="dlrm-fuzz-onnx-") as folder:
        source, out = os.path.join(folder, "model.onnx"), os.path.join(folder, "model.mlir")
        with open(source, "wb") as f:
            f.write(model)

        def run() -> str:
            tool([source, "-o", out])
            with open(out) as f:
                return entry_as_main(f.read())

        return run_stage("import", run)


class OnnxRoad(OnnxLowered):
    """What the ONNX targets that compile with IREE share (a mixin before the
    IREE target class: its ``lowered`` replaces the FX export and import)."""

    @property
    def program_group(self) -> str:
        """One imported program per ``model.onnx`` for every IREE backend."""
        return f"iree-import-onnx|{self.import_group}"

    def import_model(self, model: bytes) -> str:
        """``iree-import-onnx``."""
        return import_onnx(model)

    def lowered(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None) -> str:
        """``model.onnx`` (cached, shared) imported by ``iree-import-onnx`` (cached)."""
        model = onnx_model(config, seed, self.dynamic, example, self.bags, timer, cache)
        key = cache_key("iree-import-onnx", hashlib.sha256(model).hexdigest(), tool_versions())
        mlir = _through_cache(cache, key, lambda: timer.measure("import", lambda: import_onnx(model)))
        assert isinstance(mlir, str)
        return mlir

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """IREE's compile; an ``onnx.*`` op it could not convert is the import's failure."""
        try:
            return super().compile_program(mlir, timer, cache)  # type: ignore[misc]
        except StageFailure as failure:
            if failure.stage.value == "compile" and unconverted_onnx_op(failure.message):
                raise failure.refiled("import", owner=ONNX_IMPORT) from failure
            raise

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Keep the imported program (``onnx.*`` ops as ``torch.operator``)."""
        return {"onnx-import.mlir": artifact.mlir} if isinstance(artifact, _Artifact) else {}


@dataclass(frozen=True)
class OnnxIreeTarget(OnnxRoad, IreeTarget):
    """torch.onnx -> iree-import-onnx -> iree-compile ``backend`` -> IREE runtime ``driver``."""

    bags: str = "loop"


@dataclass(frozen=True)
class OnnxVulkanTarget(OnnxRoad, VulkanTarget):
    """The ONNX road compiled for the Vulkan device present (lavapipe on a CPU machine)."""

    bags: str = "loop"
