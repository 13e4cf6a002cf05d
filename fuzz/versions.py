"""Versions of the toolchain under test: every finding and every cached
artifact is only meaningful together with them."""

from __future__ import annotations

import functools
from importlib import metadata

__all__ = ["tool_versions", "TOOLS"]

TOOLS = ("torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime", "hypothesis", "numpy")


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    found = []
    for tool in TOOLS:
        try:
            found.append((tool, metadata.version(tool)))
        except metadata.PackageNotFoundError:
            found.append((tool, "not installed"))
    return tuple(found)


def tool_versions() -> dict[str, str]:
    return dict(_versions())
