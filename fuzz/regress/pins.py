"""What a toolchain pin is and where pins come from: the tested pin set
(``PINNED``), the ``NAME==VERSION`` syntax and package-name spelling pip
compares by, the requirement lines of a constraints file or a
``pyproject.toml``, and the releases of a package on pip's index (the range
bisect cuts). No environment is built here: ``fuzz.regress.toolchains``
turns pins into a ``Toolchain`` and a uv environment.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

__all__ = ["PINNED", "ToolchainError", "canonical_name", "split_pin", "is_pin", "pinned_lines",
           "releases", "version_key"]

# The pins of constraints.txt, the tested toolchain (a test keeps the two in
# step; a copy here because an installed wheel carries no constraints file).
# Packages a Toolchain does not name keep these versions.
PINNED: tuple[str, ...] = (
    "decorator==5.3.1",
    "iree-base-compiler==3.13.0",
    "iree-base-runtime==3.13.0",
    "iree-turbine==3.9.0",
    "onnx==1.23.1",
    "onnxruntime==1.30.0",
    "onnxscript==0.7.2",
    "torch==2.13.0",
    "torch-mlir==20261001",
)
_PIN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([0-9][0-9A-Za-z.+!_-]*)")


class ToolchainError(Exception):
    """Bad pins, a version that does not install, or uv missing: one line that
    names the problem and the fix."""


def canonical_name(name: str) -> str:
    """A package name as pip compares it: lower case, runs of ``-_.`` one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def split_pin(pin: str) -> tuple[str, str]:
    """``NAME==VERSION`` as (canonical name, version), or the error that shows the form."""
    match = _PIN.fullmatch(pin.strip())
    if not match:
        raise ToolchainError(
            f"pin={pin!r}: write an exact pin NAME==VERSION, e.g. iree-base-compiler==3.10.0")
    return canonical_name(match.group(1)), match.group(2)


def is_pin(line: str) -> bool:
    """Whether a requirement line is an exact ``NAME==VERSION`` pin."""
    return _PIN.fullmatch(line) is not None


def pinned_lines(path: Path) -> list[str]:
    """The requirement lines of a constraints file, or a pyproject.toml's
    ``[project] dependencies``, spaces and comments dropped."""
    if path.suffix == ".toml":
        import tomllib
        deps = tomllib.loads(path.read_text()).get("project", {}).get("dependencies", [])
        return [str(dep).replace(" ", "") for dep in deps]
    return [line.split("#", 1)[0].replace(" ", "") for line in path.read_text().splitlines()]


def releases(package: str) -> list[str]:
    """Installable versions of ``package``, oldest first (bisect ranges such as
    2.9.0..3.13.0 are cut from this list). Asks pip's index, the same one uv
    is pointed at."""
    name, _ = split_pin(f"{package}==0")
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name],
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"package={package!r}: the index did not answer; "
                             "check the network") from exc
    match = re.search(r"Available versions:\s*(.+)", done.stdout)
    if done.returncode != 0 or not match:
        raise ToolchainError(f"package={package!r}: no installable releases found; "
                             "check the name on the package index")
    return sorted((v.strip() for v in match.group(1).split(",")), key=version_key)


def version_key(version: str) -> tuple[object, ...]:
    """A release version's sort key: PEP 440 order, else its numeric parts."""
    try:
        from packaging.version import InvalidVersion, Version
        try:
            return (0, Version(version))
        except InvalidVersion:
            pass
    except ImportError:
        pass
    return (1, tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.+-]", version)))
