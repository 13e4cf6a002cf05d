"""The export every ONNX road shares: the recipe's module (``fuzz.model.recipe``)
through ``torch.onnx.export(module, args, dynamo=True)`` into a ``model.onnx``,
in the plain form or the loop-free bag variant (``fuzz.targets.bags``).

The file is cached by everything that determines it (config, seed when the
weights are inline, shapes, variant, tool versions), so the ONNX targets of
one sample (onnxruntime, the IREE backends, torch-mlir's refbackend) export
it once; a failure of the exporter is cached and is ``torch.onnx``'s.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from typing import Any, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.pipeline import StageFailure, Timer, run_stage
from fuzz.targets.versions import tool_versions

__all__ = ["EXPORTER", "onnx_model", "export_module", "variant_of", "onnx_available"]

# The owner of the exporter's failures (and of a wrong answer every ONNX
# executor computes alike: ``oracles.blame``).
EXPORTER = "torch.onnx"


def onnx_available() -> tuple[bool, str]:
    """The exporter needs the ``onnx`` and ``onnxscript`` packages."""
    import importlib.util

    missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    if missing:
        return False, (f"the ONNX road needs {' and '.join(missing)}: "
                       f"pip install -c constraints.txt onnx onnxscript")
    return True, ""


def variant_of(config: DLRMConfig, bags: str) -> str:
    """The bag form the export of ``config`` actually takes for a target asking
    for ``bags``: the loop-free one falls back to the plain form where it
    cannot express the config (``bags.supported``)."""
    from fuzz.targets import bags as forms

    if bags == forms.LOOP_FREE and not forms.supported(config)[0]:
        return forms.LOOP
    return bags


def export_module(module: Any, args: tuple[Any, ...], dynamic_shapes: Any,
                  bags: str = "loop") -> bytes:
    """``torch.onnx.export(..., dynamo=True)`` of any module, as the bytes of
    ``model.onnx``; an exporter failure is an export-stage ``StageFailure``."""
    import torch

    from fuzz.targets import bags as forms

    if bags == forms.LOOP_FREE:
        module = forms.loop_free(module)

    def export() -> bytes:
        # The exporter narrates each step on stdout; a worker's stdout is no place for it.
        with contextlib.redirect_stdout(io.StringIO()):
            program = torch.onnx.export(module, args, dynamo=True, dynamic_shapes=dynamic_shapes,
                                        verbose=False, report=False)
        assert program is not None
        with tempfile.TemporaryDirectory(prefix="dlrm-fuzz-onnx-") as folder:
            path = os.path.join(folder, "model.onnx")
            program.save(path)
            with open(path, "rb") as saved:
                return saved.read()

    return run_stage("export", export)


def onnx_model(config: DLRMConfig, seed: int, dynamic: bool, example: Sequence[np.ndarray],
               bags: str, timer: Timer, cache: ArtifactCache | None) -> bytes:
    """The sample's ``model.onnx`` (the recipe's program, ``bags`` form), cached."""
    from fuzz.model.recipe import recipe
    from fuzz.model.weights import weights_as_inputs
    from fuzz.targets.compiled import _through_cache

    form = variant_of(config, bags)
    shapes = "dynamic" if dynamic else [list(a.shape) for a in example]
    key = cache_key("onnx", config.to_dict(), None if weights_as_inputs(config) else seed,
                    shapes, form, tool_versions())

    def export() -> bytes:
        module, args, spec = recipe(config, seed, dynamic, example, timer.measure)
        return timer.measure("export", lambda: export_module(module, args, spec, form))

    model = _through_cache(cache, key, export)
    if not isinstance(model, bytes):
        raise StageFailure("export", "TypeError", "cached ONNX model is not bytes")
    return model
