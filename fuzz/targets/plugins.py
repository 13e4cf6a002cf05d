"""User-defined targets: a team validating its own lowering or flags plugs
in targets from its own module, without editing dlrm-fuzz.

Two ways in: ``--target-plugin module:factory`` on the command line, or an
entry point in the ``dlrm_fuzz.targets`` group of an installed package. A
factory is a callable with no arguments returning a ``Target`` or an iterable
of them. Plugin targets join the table under their own names; a name that
clashes with a built-in target is refused rather than silently replacing it.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Callable, Iterable, Sequence

from fuzz.targets.catalog import FAKE_TARGETS, TARGETS, Target

__all__ = ["PluginError", "ENTRY_POINT_GROUP", "load_plugins", "target_table"]

ENTRY_POINT_GROUP = "dlrm_fuzz.targets"


class PluginError(ValueError):
    """A target plugin that cannot be loaded or returns something unusable."""


def _factory_from_spec(spec: str) -> Callable[[], Any]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise PluginError(f"target-plugin={spec!r}: write it as module:factory, "
                          f"e.g. my_targets:make_targets")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"target-plugin={spec!r}: cannot import {module_name!r} ({exc}); "
                          f"is it on PYTHONPATH?") from exc
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise PluginError(f"target-plugin={spec!r}: {module_name} has no callable {attribute!r}")
    return factory


def _targets_from(origin: str, factory: Callable[[], Any]) -> list[Target]:
    try:
        made = factory()
    except Exception as exc:
        raise PluginError(f"target-plugin={origin!r}: its factory raised "
                          f"{type(exc).__name__}: {exc}") from exc
    items: Iterable[Any] = [made] if isinstance(made, Target) else made
    targets = list(items) if isinstance(items, Iterable) else [items]
    for target in targets:
        if not isinstance(target, Target):
            raise PluginError(f"target-plugin={origin!r}: returned {type(target).__name__}, "
                              f"not a fuzz.targets.catalog.Target")
    return targets


def load_plugins(specs: Sequence[str], entry_points: bool = True) -> dict[str, Target]:
    """Targets from ``module:factory`` specs and installed entry points."""
    found: list[tuple[str, Callable[[], Any]]] = [(s, _factory_from_spec(s)) for s in specs]
    if entry_points:
        for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                found.append((f"{point.name} = {point.value}", point.load()))
            except Exception as exc:
                raise PluginError(f"target-plugin entry point {point.name!r} ({point.value}) "
                                  f"failed to load: {exc}") from exc
    plugged: dict[str, Target] = {}
    for origin, factory in found:
        for target in _targets_from(origin, factory):
            if target.name in TARGETS or target.name in FAKE_TARGETS or target.name in plugged:
                raise PluginError(f"target-plugin={origin!r}: target name {target.name!r} is "
                                  f"already taken; give it another name")
            plugged[target.name] = target
    return plugged


def target_table(specs: Sequence[str] = (), entry_points: bool = True) -> dict[str, Target]:
    """The built-in table plus every plugin target."""
    return {**TARGETS, **load_plugins(specs, entry_points)}
