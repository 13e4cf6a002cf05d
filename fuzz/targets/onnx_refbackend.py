"""The ONNX road into torch-mlir alone: the sample's ``model.onnx`` imported by
torch-mlir's own ONNX importer (``torch-mlir-import-onnx``), converted by its
``TorchOnnxToTorch`` patterns to the Torch backend contract, lowered to
linalg-on-tensors and run on torch-mlir's refbackend. No IREE on the way: a
torch-mlir-only witness that tells torch-mlir's ONNX conversions
(``torch-mlir:onnx``) from IREE's backends on the ONNX road, as refbackend
does for the FX road.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.compiled import _Artifact, _through_cache
from fuzz.targets.fx_refbackend import RefBackendTarget
from fuzz.targets.onnx_export import OnnxLowered, onnx_model
from fuzz.targets.onnx_iree import run_importer
from fuzz.targets.pipeline import StageFailure, Timer, run_stage
from fuzz.targets.versions import tool_versions
from fuzz.targets import pipeline

__all__ = ["OnnxRefBackendTarget", "onnx_to_torch", "ONNX_TO_TORCH_PIPELINE"]

# torch-mlir's own e2e ONNX configuration (torch_mlir_e2e_test onnx_backend):
# the ONNX conversions, then the Torch backend contract.
ONNX_TO_TORCH_PIPELINE = (
    "builtin.module(func.func(convert-torch-onnx-to-torch),"
    "torch-lower-to-backend-contract{backend-legal-ops=aten.flatten.using_ints,"
    "aten.adaptive_avg_pool1d,aten.unflatten.int})")


def onnx_to_torch(model: bytes) -> str:
    """``torch-mlir-import-onnx`` then ``ONNX_TO_TORCH_PIPELINE``: Torch Backend IR text."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_dialect
    from torch_mlir.passmanager import PassManager
    from torch_mlir.tools.import_onnx.__main__ import main, parse_arguments

    text = run_importer(model, lambda argv: main(parse_arguments(argv)))
    context = ir.Context()
    torch_dialect.register_dialect(context)
    with context:
        module = run_stage("import", lambda: ir.Module.parse(text))
        try:
            run_stage("import", lambda: PassManager.parse(ONNX_TO_TORCH_PIPELINE).run(
                module.operation))
        except StageFailure as failure:
            # The parsed text's own positions ("-":29:13) prefix each diagnostic;
            # iree-compile's do not: without them both say the same line.
            failure.failure = dataclasses.replace(
                failure.failure, message=_TEXT_POSITION.sub("error: ", failure.message))
            raise
        return run_stage("import", lambda: str(module))


_TEXT_POSITION = re.compile(r'error: "-":\d+:\d+: ')


@dataclass(frozen=True)
class OnnxRefBackendTarget(OnnxLowered, RefBackendTarget):
    """torch.onnx -> torch-mlir's ONNX importer and conversions -> linalg -> refbackend."""

    bags: str = "loop"

    @property
    def program_group(self) -> str:
        """torch-mlir's own ONNX import, apart from ``iree-import-onnx``'s."""
        return f"torch-mlir-import-onnx|{self.import_group}"

    def import_model(self, model: bytes) -> str:
        """torch-mlir's ONNX import and conversions, then the linalg lowering."""
        return _lower_to_linalg(onnx_to_torch(model))

    def lowered(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None) -> str:
        """``model.onnx`` (shared) -> Torch Backend IR -> linalg, each cached."""
        model = onnx_model(config, seed, self.dynamic, example, self.bags, timer, cache)
        digest = hashlib.sha256(model).hexdigest()
        versions = tool_versions()

        def to_linalg() -> str:
            torch_ir = _through_cache(cache, cache_key("onnx-to-torch", digest, versions),
                                      lambda: timer.measure("import", lambda: onnx_to_torch(model)))
            assert isinstance(torch_ir, str)
            return timer.measure("import", lambda: _lower_to_linalg(torch_ir))

        mlir = _through_cache(cache, cache_key("onnx-linalg", digest, versions), to_linalg)
        assert isinstance(mlir, str)
        return mlir

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Keep the linalg program refbackend ran."""
        return {"onnx-linalg.mlir": artifact.mlir} if isinstance(artifact, _Artifact) else {}


def _lower_to_linalg(torch_ir: str) -> str:
    """Torch Backend IR to linalg-on-tensors: the FX road's own lowering, so a
    failure there is ``torch-mlir:linalg-on-tensors``'s, not the ONNX conversions'."""

    try:
        return pipeline.lower_torch(torch_ir, "linalg-on-tensors")
    except StageFailure as failure:
        failure.failure = dataclasses.replace(failure.failure, owner="torch-mlir:linalg-on-tensors")
        raise
