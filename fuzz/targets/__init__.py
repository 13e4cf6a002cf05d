"""The roads a sample takes to a compiled answer: the ``Target`` interface
and the table of targets (``catalog``), the stages (``pipeline``), the
artifact ``cache``, torch-mlir's reference backend (``refbackend``),
devices and Vulkan, plug-ins and the toolchain's ``versions``. A new target
goes into ``catalog`` (or a module of its own beside it)."""

from fuzz import _moved
from fuzz.targets.catalog import (EAGER, REFERENCE, TARGETS, CompiledTarget, EagerTarget,
                                  IreeTarget, RefBackendTarget, Target, UnavailableTarget,
                                  UnknownTarget, VulkanTarget, available_targets, resolve_targets)

# The target kinds are public: plug-ins subclass or configure them.
__all__ = ["Target", "EagerTarget", "CompiledTarget", "IreeTarget", "VulkanTarget",
           "RefBackendTarget", "UnknownTarget", "UnavailableTarget", "REFERENCE", "EAGER",
           "TARGETS", "available_targets", "resolve_targets"]


def __getattr__(name: str) -> object:
    """The old ``fuzz.targets`` module's other names (now ``fuzz.targets.catalog``)."""
    return _moved.forward(__name__, "fuzz.targets", "fuzz.targets.catalog", name)
