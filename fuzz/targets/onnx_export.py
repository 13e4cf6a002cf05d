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
import dataclasses
import io
import logging
import os
import re
import tempfile
import warnings
from typing import Any, Iterator, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.pipeline import StageFailure, Timer, run_stage
from fuzz.targets.versions import tool_versions
from fuzz.targets import bags as forms
from fuzz.targets.compiled import _through_cache

__all__ = ["EXPORTER", "ONNX_IMPORT", "OnnxExported", "OnnxLowered", "exporter_of", "exception_summary", "onnx_model", "export_module", "variant_of", "onnx_available"]

# The owner of the exporter's failures (and of a wrong answer every ONNX
# executor computes alike: ``oracles.blame``).
EXPORTER = "torch.onnx"

# The owner of the exporter's first step (the FX road's ``torch.export`` call).
TORCH_EXPORT = "torch.export"

# The owner of the ONNX import and of torch-mlir's ONNX conversions.
ONNX_IMPORT = "torch-mlir:onnx"


def exporter_of(bags: str) -> str:
    """Who made a target's ``model.onnx``: the exporter, or for the loop-free
    variant the exporter of our rewritten bags (``torch.onnx[loop-free]``): a
    fault only the variant shows is not the exporter's on the model as written."""

    return EXPORTER if bags == forms.LOOP else f"{EXPORTER}[{bags}]"


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

    if bags == forms.LOOP_FREE and not forms.supported(config)[0]:
        return forms.LOOP
    return bags


def export_module(module: Any, args: tuple[Any, ...], dynamic_shapes: Any,
                  bags: str = "loop") -> bytes:
    """``torch.onnx.export(..., dynamo=True)`` of any module, as the bytes of
    ``model.onnx``; an exporter failure is an export-stage ``StageFailure``.

    The exporter's first step is ``torch.export.export(strict=False)``, the
    FX road's own call. When that step fails, the exporter wraps the error in
    a ``TorchExportError`` of its own words; the failure is then filed as
    ``torch.export``'s, with the original exception (``_step_one_cause``),
    so that one export bug is one bucket whichever road met it. The
    exporter's warnings (a missing torchvision, renamed dynamic axes) would
    otherwise lead every failure's captured text: they are silenced."""
    import torch

    if bags == forms.LOOP_FREE:
        module = forms.loop_free(module)
    step_one: list[BaseException] = []

    def export() -> bytes:
        # The exporter narrates each step on stdout; a worker's stdout is no place for it.
        with contextlib.redirect_stdout(io.StringIO()), _exporter_quiet():
            try:
                program = torch.onnx.export(module, args, dynamo=True,
                                            dynamic_shapes=dynamic_shapes, verbose=False,
                                            report=False)
            except Exception as exc:
                cause = _step_one_cause(exc)
                if cause is None:
                    raise
                step_one.append(cause)
                raise cause from None
        assert program is not None
        with tempfile.TemporaryDirectory(prefix="dlrm-fuzz-onnx-") as folder:
            path = os.path.join(folder, "model.onnx")
            program.save(path)
            with open(path, "rb") as saved:
                return saved.read()

    try:
        return run_stage("export", export)
    except StageFailure as failure:
        if step_one:  # torch.export's own failure, as the FX road files it
            failure.failure = dataclasses.replace(failure.failure, owner=TORCH_EXPORT)
        else:  # the exporter's own: its exception summary, not its advice
            failure.failure = dataclasses.replace(
                failure.failure, message=exception_summary(failure.failure.message))
        raise


# The exporter's error text: a header naming the step, advice, then
# "## Exception summary" and the exception itself, then a pointer to the stack.
_SUMMARY = re.compile(r"## Exception summary\s*(.*?)\s*(?:\(Refer to the full stack trace|$)",
                      re.DOTALL)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def exception_summary(message: str) -> str:
    """The exception the exporter reports (``<class 'X'>: text``) without its
    step header and advice, which every failure of a step shares and which
    would make all of them one bucket; the message itself when it has none."""
    found = _SUMMARY.search(_ANSI.sub("", message))
    return found.group(1).strip() if found and found.group(1).strip() else message


def _step_one_cause(error: BaseException) -> BaseException | None:
    """The ``torch.export`` exception behind the exporter's ``TorchExportError``
    (its first step failed), else None."""
    if type(error).__name__ == "TorchExportError" and error.__cause__ is not None:
        return error.__cause__
    return None


@contextlib.contextmanager
def _exporter_quiet() -> Iterator[None]:
    """The exporter's loggers at ERROR and Python warnings off, for one export."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "onnxscript")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def onnx_model(config: DLRMConfig, seed: int, dynamic: bool, example: Sequence[np.ndarray],
               bags: str, timer: Timer, cache: ArtifactCache | None) -> bytes:
    """The sample's ``model.onnx`` (the recipe's program, ``bags`` form), cached."""
    from fuzz.model.recipe import recipe
    from fuzz.model.weights import weights_as_inputs

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


class OnnxExported:
    """What every target on the sample's ``model.onnx`` shares (a mixin before
    its target class): the export's owner and variant, one export per shape
    mode and bag form, the exporter's packages."""

    # Declared by the dataclasses this mixes into.
    name: str
    dynamic: bool
    bags: str

    @property
    def upstream(self) -> str:
        """The frontend before the lowering, as blame names it for a wrong
        answer (``oracles.blame``): the exporter, or the exporter of the
        loop-free variant. An export *failure* is the exporter's whichever
        form it exported (``owner``): the variant only rewrites bags, and
        torch.onnx failing on a valid PyTorch program is torch.onnx's bug."""
        return exporter_of(self.bags)

    @property
    def import_group(self) -> str:
        """One ``model.onnx`` per shape mode and bag form, shared by the ONNX targets."""
        return f"onnx|{self.bags}|{'dynamic' if self.dynamic else 'static'}"

    def variant(self, config: DLRMConfig) -> str:
        """The bag form this target exports ``config`` in (``bags.supported``)."""
        return variant_of(config, self.bags)

    def availability(self) -> tuple[bool, str]:
        """The exporter's packages, then what the target class needs."""
        ok, why = onnx_available()
        if not ok:
            return ok, why
        return super().availability()  # type: ignore[misc,no-any-return]


class OnnxLowered(OnnxExported):
    """The ONNX targets that torch-mlir's ONNX conversions lower (IREE's
    backends, torch-mlir's refbackend): their owners, and any module
    (localization's instrumented program) taken by the same road."""

    def owner(self, stage: str) -> str:
        """The export is the exporter's, the import torch-mlir's ONNX importer's."""
        if stage in ("build", "export"):
            return EXPORTER
        if stage == "import":
            return ONNX_IMPORT
        return self.backend_owner  # type: ignore[attr-defined,no-any-return]

    @property
    def lowering_owner(self) -> str:
        """What the backend ran was lowered by torch-mlir's ONNX conversions."""
        return ONNX_IMPORT

    def import_model(self, model: bytes) -> str:
        """``model.onnx``'s bytes to the program the backend compiles."""
        raise NotImplementedError

    def lower_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                     timer: Timer) -> str:
        """Any module by the same road (localization's instrumented program)."""
        model = timer.measure("export", lambda: export_module(module, example_args, dynamic_shapes,
                                                              self.bags))
        return timer.measure("import", lambda: self.import_model(model))
