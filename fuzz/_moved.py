"""Old module paths of dlrm-fuzz, kept working for one release after fuzz/
was regrouped into subpackages (model, targets, engine, triage, reports,
store, regress, cli): plug-in authors import ``fuzz.pipeline`` or
``fuzz.config`` from their own code, and that code should warn, not break.

One table, read by one import hook that ``fuzz/__init__.py`` installs: an
old path imports a stand-in module that forwards every attribute to the new
module and emits a DeprecationWarning naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Any, Sequence

__all__ = ["MOVED", "install", "forward"]

MOVED: dict[str, str] = {
    "fuzz.config": "fuzz.model.config", "fuzz.sample": "fuzz.model.sample",
    "fuzz.weights": "fuzz.model.weights",
    "fuzz.pipeline": "fuzz.targets.pipeline", "fuzz.cache": "fuzz.targets.cache",
    "fuzz.refbackend": "fuzz.targets.refbackend", "fuzz.vulkan": "fuzz.targets.vulkan",
    "fuzz.devices": "fuzz.targets.devices", "fuzz.plugins": "fuzz.targets.plugins",
    "fuzz.versions": "fuzz.targets.versions",
    "fuzz.campaign": "fuzz.engine.campaign", "fuzz.schedule": "fuzz.engine.schedule",
    "fuzz.execute": "fuzz.workers.execute",
    "fuzz.raypool": "fuzz.workers.raypool", "fuzz.progress": "fuzz.engine.progress",
    "fuzz.interrupt": "fuzz.engine.interrupt", "fuzz.coverage": "fuzz.engine.coverage",
    "fuzz.localize": "fuzz.triage.localize", "fuzz.ablate": "fuzz.triage.ablate",
    "fuzz.shrink": "fuzz.triage.shrink", "fuzz.edits": "fuzz.triage.edits",
    "fuzz.repair": "fuzz.triage.repair",
    "fuzz.repro": "fuzz.reports.repro", "fuzz.toolfiles": "fuzz.reports.toolfiles",
    "fuzz.report": "fuzz.reports.markdown", "fuzz.bugreport": "fuzz.reports.bugreport",
    "fuzz.corpus": "fuzz.store.corpus", "fuzz.corpus_seed": "fuzz.store.seed",
    "fuzz.rekey": "fuzz.store.rekey",
    "fuzz.replay": "fuzz.regress.replay", "fuzz.bump": "fuzz.regress.bump",
    "fuzz.bumpreport": "fuzz.regress.bumpreport", "fuzz.bisect": "fuzz.regress.bisect",
    "fuzz.matrix": "fuzz.regress.matrix", "fuzz.toolchains": "fuzz.regress.toolchains",
    "fuzz.toolchain_path": "fuzz.regress.toolchain_path",
    "fuzz.cli_toolchains": "fuzz.cli.regress",
}
"""Old module -> new module. Old modules that are packages now (``fuzz.model``,
``fuzz.targets``, ``fuzz.triage``, ``fuzz.workers``, ``fuzz.cli``) forward their old names
through ``forward`` in their ``__init__``."""


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes "
                  "in the next release)", DeprecationWarning, stacklevel=3)


class _StandIn(importlib.abc.Loader):
    """Loads an old path as a module that forwards to the new one."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        _warn(spec.name, self.new)
        module = types.ModuleType(spec.name, f"Moved to {self.new}.")
        real = importlib.import_module(self.new)
        module.__getattr__ = lambda name: getattr(real, name)  # type: ignore[method-assign]
        setattr(module, "__all__", list(getattr(real, "__all__", ())))
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the stand-in only forwards."""


class _OldPaths(importlib.abc.MetaPathFinder):
    """Finds the old paths of ``MOVED`` (and nothing else)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        return importlib.machinery.ModuleSpec(fullname, _StandIn(new)) if new else None


def install() -> None:
    """Put the old-path finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.append(_OldPaths())


def forward(package: str, old_module: str, new: str, name: str) -> Any:
    """A package's ``__getattr__`` for the names its old module had:
    ``fuzz.model.build`` from ``fuzz.model.dlrm``, with the warning.

    A name that is one of the package's own submodules is not forwarded:
    ``from fuzz.triage import edits`` asks the package for ``edits`` before
    importing it, and loading the old module's home then would import half
    the package in a circle."""
    if importlib.util.find_spec(f"{package}.{name}") is not None:
        raise AttributeError(f"module {package!r} has no attribute {name!r} (a submodule, not yet imported)")
    real = importlib.import_module(new)
    if not hasattr(real, name):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{old_module}.{name}", f"{new}.{name}")
    return getattr(real, name)
