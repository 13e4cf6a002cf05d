"""Versions of the toolchain under test: every finding and every cached
artifact is only meaningful together with them.

``tool_versions`` are the distributions' release numbers: what a cache key and
a Ray cluster's version check compare. ``build_identity`` adds what tells one
build of a release from another (a local torch-mlir or IREE build often keeps
a release's version, or carries a placeholder such as 0.0.1): the revision
line ``iree-compile --version`` prints, where the torch-mlir package is
installed, and the interpreter that ran. Paths differ between machines, so
they are recorded with each case but kept out of keys and version checks.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["tool_versions", "build_identity", "recorded_versions", "TOOLS"]

# The other roads into IREE add their exporter, executor and frontend: a
# finding on the ONNX or turbine road is only meaningful with their versions.
TOOLS = ("torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime", "hypothesis", "numpy",
         "onnx", "onnxscript", "onnxruntime", "iree-turbine")


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
    """Installed versions of the toolchain packages: part of every cache key and report."""
    return dict(_versions())


def _package_dir(name: str) -> Path | None:
    """Where an importable package lives, without importing it (torch_mlir is
    a namespace package: no ``__file__``, one search location)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0])
    return Path(spec.origin).parent if spec.origin else None


def _iree_compile() -> str | None:
    """The ``iree-compile`` the Python compiler API runs: the binary inside
    the ``iree.compiler`` package, else the one on PATH (a source build)."""
    package = _package_dir("iree.compiler")
    if package is not None:
        inside = package / "_mlir_libs" / "iree-compile"
        if inside.is_file():
            return str(inside)
    return shutil.which("iree-compile") or shutil.which(
        "iree-compile", path=str(Path(sys.executable).parent))


def _revision_line(tool: str | None) -> str:
    """``IREE compiler version 3.13.0rc20261016 @ 89ece87...``: the line of
    ``--version`` that names the build's revision."""
    if tool is None:
        return "not found"
    try:
        done = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({type(exc).__name__})"
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return next((line for line in lines if "compiler version" in line),
                lines[0] if lines else f"no output (exit {done.returncode})")


@functools.lru_cache(maxsize=1)
def _identity() -> tuple[tuple[str, str], ...]:
    mlir = _package_dir("torch_mlir")
    return (("iree-compile --version", _revision_line(_iree_compile())),
            ("torch-mlir location", str(mlir) if mlir is not None else "not installed"),
            ("python", sys.executable))


def build_identity() -> dict[str, str]:
    """What identifies a local build beyond its version (once per process:
    one ``iree-compile --version`` call, about 0.1 s)."""
    return dict(_identity())


def recorded_versions() -> dict[str, str]:
    """What a stored case records: the versions and the build identity."""
    return {**tool_versions(), **build_identity()}
