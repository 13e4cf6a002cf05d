"""What every compiled target shares: ``CompiledTarget`` (export by the one
recipe, torch-mlir's FX import and lowering to an output type, the shared
import of both shape modes, the artifact cache) and the artifact it hands
its run. The backends that compile and run the lowered program subclass it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.targets.pipeline import StageFailure, Timer
from fuzz.targets.target import Target
from fuzz.targets.versions import tool_versions
from oracles.results import Failure
from fuzz.targets import pipeline

__all__ = ["CompiledTarget"]


@dataclass(frozen=True)
class CompiledTarget(Target):
    """torch.export -> torch-mlir (``output_type``) -> a backend. The lowered
    program is cached by everything that determines it, so targets sharing an
    output type (and replays) export and lower it once."""

    output_type: str = "linalg-on-tensors"
    dynamic: bool = False

    @property
    def any_shape(self) -> bool:
        """Only a program compiled with dynamic shapes accepts every batch shape."""
        return self.dynamic

    def owner(self, stage: str) -> str:
        """Blame export to torch.export, import to torch-mlir, the rest to the backend."""
        if stage in ("build", "export"):
            return "torch.export"
        if stage == "import":
            return f"torch-mlir:{self.output_type}"
        return self.backend_owner

    @property
    def backend_owner(self) -> str:
        """The component behind the compile and run stages: one per backend
        (static and dynamic forms, and drivers of one backend, share it)."""
        return self.name

    @property
    def lowering_owner(self) -> str:
        """The torch-mlir lowering to ``output_type`` produced what the backend consumed."""
        return f"torch-mlir:{self.output_type}"

    def dynamic_variant(self) -> "CompiledTarget":
        """The same target compiled with dynamic shapes (a ``-dyn`` twin in the table)."""
        return dataclasses.replace(self, name=f"{self.name}-dyn", dynamic=True,
                                   description=f"{self.description} (dynamic shapes)")

    @property
    def program_group(self) -> str:
        """Targets with one output type and shape mode lower the model to the same program."""
        return f"{self.output_type}|{self.import_group}"

    @property
    def import_group(self) -> str:
        """Static and dynamic forms each share one export and one Torch IR import."""
        return "dynamic" if self.dynamic else "static"

    def lowered(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None) -> str:
        """The model lowered to ``output_type`` MLIR, cached by everything that determines it."""
        from fuzz.model.recipe import recipe
        from fuzz.model.weights import weights_as_inputs

        as_inputs = weights_as_inputs(config)

        shapes = "dynamic" if self.dynamic else [list(a.shape) for a in example]
        # With weights as inputs the program is the same for every seed.
        program = (config.to_dict(), None if as_inputs else seed, shapes, tool_versions())
        raw_key = cache_key("raw-program", *program)
        kept: dict[str, str | None] = {}

        def exportable() -> tuple[Any, tuple[Any, ...], Any]:
            return recipe(config, seed, self.dynamic, example, timer.measure)

        def to_torch_ir() -> str:
            # An export failure is cached here: every output type of this shape mode shares it.
            module, example_args, spec = exportable()
            exported = timer.measure("export", lambda: pipeline.export(module, example_args, spec))
            torch_ir, kept["raw"] = timer.measure("import", lambda: pipeline.import_to_torch(
                exported, keep_raw=_small_program(config, as_inputs)))
            if cache is not None and kept["raw"] is not None:
                cache.put(raw_key, kept["raw"])
            return torch_ir

        def lower() -> str:
            # One export and import to Torch Backend IR per shape mode, shared
            # by every output type; then this output type's own lowering.
            torch_ir = _through_cache(cache, cache_key("torch-program", *program), to_torch_ir)
            assert isinstance(torch_ir, str)
            if "raw" not in kept and cache is not None:  # a cached import: its raw text, if kept
                raw = cache.get(raw_key)
                kept["raw"] = raw if isinstance(raw, str) else None
            return timer.measure("import", lambda: pipeline.lower_torch(
                torch_ir, self.output_type, kept.get("raw")))

        key = cache_key("program", *program[:3], self.output_type, program[3])
        mlir = _through_cache(cache, key, lower)
        assert isinstance(mlir, str)
        return mlir

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Lower the model (cached) and hand the program to this target's backend."""
        mlir = self.lowered(config, seed, example, timer, cache)
        return self.compile_program(mlir, timer, cache)

    def leading_inputs(self, config: DLRMConfig, seed: int, timer: Timer) -> list[np.ndarray]:
        """What the compiled program takes before a batch: the recipe's
        (``fuzz.model.recipe.leading_inputs``), as it exported the program."""
        from fuzz.model.recipe import leading_inputs

        return leading_inputs(config, seed, timer.measure)

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """Backend-specific: turn lowered MLIR text into a runnable artifact."""
        raise NotImplementedError

    def lower_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                     timer: Timer) -> str:
        """torch.export then torch-mlir to ``output_type`` in one go: the path
        of a module that is not the model (a localized piece); the model's
        own (``lowered``) shares its export and import across output types."""

        exported = timer.measure("export", lambda: pipeline.export(module, example_args, dynamic_shapes))
        return timer.measure("import", lambda: pipeline.lower(exported, self.output_type))

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Not cached by module (a module has no stable key); the backend
        compile below is, by the program text."""
        return self.compile_program(self.lower_module(module, example_args, dynamic_shapes, timer),
                                    timer, cache)

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Call the loaded module on the flat inputs, timed as the run stage."""
        return timer.measure("run", lambda: artifact.module(inputs))

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Keep the lowered MLIR with a finding, named by its output type."""
        return {f"{self.output_type}.mlir": artifact.mlir}


# Tables with more elements than this, weights inline: the raw import is not
# printed for a report (tens of MB of constants, over the corpus's text limit).
_RAW_PROGRAM_MAX_ELEMENTS = 1 << 20


def _small_program(config: DLRMConfig, as_inputs: bool) -> bool:
    """Whether the raw import is small enough to keep for a lowering failure's report."""
    return as_inputs or sum(rows * config.table_width(k) for k, rows in enumerate(config.ln_emb)) \
        <= _RAW_PROGRAM_MAX_ELEMENTS


def _through_cache(cache: ArtifactCache | None, key: str,
                   compute: Callable[[], str | bytes]) -> str | bytes:
    """``compute()`` once per key: a cached result is returned, a cached stage
    failure is raised again, and a new result or failure is cached."""
    if cache is None:
        return compute()
    cached = cache.get(key)
    if isinstance(cached, Failure):
        raise StageFailure.of(cached)
    if cached is not None:
        return cached
    try:
        value = compute()
    except StageFailure as failure:
        cache.put(key, failure.failure)
        raise
    cache.put(key, value)
    return value


@dataclass(frozen=True)
class _Artifact:
    mlir: str
    module: Any = field(compare=False)
