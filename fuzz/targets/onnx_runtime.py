"""onnxruntime on the sample's ``model.onnx``: a second executor of the very
file the ONNX road into IREE imports, independent of torch-mlir and IREE. A
wrong answer it computes alike with the ONNX targets is the exporter's
(``torch.onnx``); one it alone computes is its own (``onnxruntime``).

onnxruntime's CPU provider has no bfloat16 kernels for most ops (``Gemm``,
``MatMul``): a bfloat16 config is not run (its batches stay unchecked, the
reason kept with the result) rather than filed as a bug per op.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Any, Sequence, cast

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache
from fuzz.targets.onnx_export import EXPORTER, OnnxExported, export_module, onnx_model
from fuzz.targets.pipeline import StageFailure, Timer, run_stage
from fuzz.targets.target import Target

__all__ = ["OnnxRuntimeTarget", "ONNXRUNTIME", "unsupported_reason", "invalid_model"]

ONNXRUNTIME = "onnxruntime"


def unsupported_reason(config: DLRMConfig) -> str | None:
    """Why onnxruntime's CPU provider cannot run ``config``'s program, or None."""
    if config.dtype == "bfloat16":
        return ("onnxruntime's CPU execution provider has no bfloat16 kernels for Gemm / "
                "MatMul: bfloat16 configs are not run on onnxruntime")
    return None


@dataclass(frozen=True)
class _Session:
    session: Any = field(compare=False)
    names: tuple[str, ...] = ()
    unsupported: str | None = None


@dataclass(frozen=True)
class OnnxRuntimeTarget(OnnxExported, Target):
    """torch.onnx -> ``model.onnx`` -> onnxruntime (CPU execution provider)."""

    bags: str = "loop"
    dynamic: bool = False

    @property
    def any_shape(self) -> bool:
        """A model exported with dynamic shapes runs every batch shape."""
        return self.dynamic

    def dynamic_variant(self) -> "OnnxRuntimeTarget":
        """The same target on the dynamic-shape export (a ``-dyn`` twin)."""
        import dataclasses

        return dataclasses.replace(self, name=f"{self.name}-dyn", dynamic=True,
                                   description=f"{self.description} (dynamic shapes)")

    def availability(self) -> tuple[bool, str]:
        """Needs the exporter's packages and onnxruntime."""
        import importlib.util

        ok, why = super().availability()
        if ok and importlib.util.find_spec("onnxruntime") is None:
            return False, "onnxruntime is not installed: pip install -c constraints.txt onnxruntime"
        return ok, why

    def owner(self, stage: str) -> str:
        """The export is the exporter's (a file onnxruntime finds invalid
        included: ``compile``); loading and running a valid file onnxruntime's."""
        return EXPORTER if stage in ("build", "export", "import") else ONNXRUNTIME

    @property
    def lowering_owner(self) -> str:
        """onnxruntime runs the exporter's file itself: no lowering between."""
        return self.upstream

    @property
    def program_group(self) -> str:
        """onnxruntime runs the file as it is."""
        return f"onnxruntime|{self.import_group}"

    def leading_inputs(self, config: DLRMConfig, seed: int, timer: Timer) -> list[np.ndarray]:
        """The recipe's leading inputs (weights as inputs), as every compiled target takes them."""
        from fuzz.model.recipe import leading_inputs

        return leading_inputs(config, seed, timer.measure)

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Export (cached, shared with the ONNX targets) and load it into a session."""
        unsupported = unsupported_reason(config)
        if unsupported is not None:
            return _Session(None, (), unsupported)
        model = onnx_model(config, seed, self.dynamic, example, self.bags, timer, cache)
        return timer.measure("compile", lambda: _session(model))

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Any module by the same road (localization's instrumented program)."""
        model = timer.measure("export", lambda: export_module(module, example_args, dynamic_shapes,
                                                              self.bags))
        return timer.measure("compile", lambda: _session(model))


    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """``session.run`` on the flat inputs, matched to the graph's inputs in order."""
        if artifact.unsupported is not None:
            # Not checked (``fuzz.workers.execute`` leaves the batch unjudged).
            return cast(list[np.ndarray], [None])
        if len(inputs) != len(artifact.names):
            raise ValueError(f"inputs={len(inputs)}: the ONNX graph takes {len(artifact.names)} "
                             f"({', '.join(artifact.names)})")
        feeds = dict(zip(artifact.names, inputs))
        return timer.measure("run", lambda: run_stage(
            "run", lambda: [np.asarray(o) for o in artifact.session.run(None, feeds)],
            capture_stderr=False))

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Say why a config was not run, when it was not."""
        return {"onnxruntime-unsupported.txt": artifact.unsupported} if artifact.unsupported else {}


def _session(model: bytes) -> _Session:
    """An onnxruntime CPU session on the model (one thread: workers share the cores)."""
    import onnxruntime as ort

    def load() -> _Session:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(model, sess_options=options,
                                       providers=["CPUExecutionProvider"])
        return _Session(session, tuple(i.name for i in session.get_inputs()))

    try:
        return run_stage("compile", load)
    except StageFailure as failure:
        if not invalid_model(failure.message):
            raise
        # The file breaks the ONNX spec (a type an op does not take, a type
        # inference conflict): the exporter wrote it, whoever reads it first.
        raise failure.refiled("export") from failure


# onnxruntime's words for a file that breaks the ONNX spec (checker, type inference).
_INVALID_MODEL = re.compile(r"INVALID_GRAPH|INVALID_PROTOBUF|TypeInferenceError|Type Error")


def invalid_model(message: str) -> bool:
    """Whether onnxruntime refused to load a model for breaking the ONNX spec."""
    return bool(_INVALID_MODEL.search(message))
