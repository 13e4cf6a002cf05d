"""Isolated, cached toolchain environments for bump and bisect.

A *toolchain* is the set of exact pins (torch, torch-mlir, iree-base-compiler,
iree-base-runtime) a finding was made with. Bump and release bisection must
re-run the same harness against other pins without touching this install, so
this module builds one virtual environment per toolchain with uv (fast, and it
caches wheels and hard-links them, so a second version costs seconds), installs
this harness into it (from a source checkout: editable, so the harness is always
today's code and only the toolchain moves; from an installed wheel: the wheel's
dependencies plus a copy of its three packages, keyed by their content), caches
it under a key of its pins, and runs ``python -m fuzz`` inside it. uv does not
read pip's configuration, so the index, find-links, constraints and
certificate pip uses here are handed to uv explicitly; that is also what keeps
torch on the local CPU wheel instead of a multi-GB CUDA build.

This module is the toolchain (``Toolchain``: its pins, its key, from a command
line) and its environment (built, cached, run in). What a pin is, pin files
and the index's releases are ``fuzz.regress.pins``; what uv needs from pip's
settings is ``fuzz.regress.installer``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from fuzz.regress.pins import PINNED, ToolchainError, is_pin, pinned_lines, releases

# Under the private names they had here: fuzz.regress.toolchain_path and the
# tests reach them on this module (and monkeypatch ``_uv_bin`` here).
from fuzz.regress.installer import (pip_settings as _pip_settings, uv_bin as _uv_bin,
                                    uv_environ as _uv_environ,
                                    wheel_requirements as _wheel_requirements)
from fuzz.regress.pins import (canonical_name as _canonical, split_pin as _split,
                               version_key as _version_key)
from fuzz.targets.versions import tool_versions
import fuzz

__all__ = [
    "PINNED", "Toolchain", "ToolchainError", "constraints_pins", "current_toolchain",
    "environment",
    "parse_pins", "releases", "run_in", "run_with", "toolchain_from", "same_toolchain",
]

_META = "dlrm-fuzz-toolchain.json"
_BUILD_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Toolchain:
    """Exact pins that differ from (or restate) :data:`PINNED`; the rest keep
    today's versions, so ``iree-base-compiler==3.10.0`` alone is a toolchain."""

    pins: tuple[str, ...] = ()
    # Or an environment named by path (``bump --to PATH``: a virtual
    # environment or a folder of wheels, see fuzz.regress.toolchain_path); no pins then.
    path: str = ""

    def __post_init__(self) -> None:
        if self.path and self.pins:
            raise ToolchainError(f"toolchain={self.path!r}: give pins or a path, not both")
        seen: set[str] = set()
        for pin in self.pins:
            name, _ = _split(pin)
            if name in seen:
                raise ToolchainError(f"pins={','.join(self.pins)!r}: {name} is pinned twice; "
                                     "keep one NAME==VERSION per package")
            seen.add(name)

    def resolved(self) -> tuple[str, ...]:
        """The full pin set: :data:`PINNED` overridden by ``pins``, sorted by name."""
        table = dict(_split(pin) for pin in PINNED)
        table.update(_split(pin) for pin in self.pins)
        return tuple(f"{name}=={version}" for name, version in sorted(table.items()))

    def key(self) -> str:
        """Short stable hash of the resolved pins, the Python version and the
        source tree installed into the environment (editable: an environment
        made from another checkout would run that checkout's harness)."""
        blob = json.dumps({"pins": self.resolved(), "python": _python_version(),
                           "source": _harness_identity()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """The pins that differ from today's, or ``pinned`` for today's set
        (the folder, for a toolchain named by path)."""
        if self.path:
            return self.path
        today = set(Toolchain().resolved())
        moved = [pin for pin in self.resolved() if pin not in today]
        return ",".join(moved) if moved else "pinned (" + ",".join(self.resolved()) + ")"


def parse_pins(text: str) -> Toolchain:
    """``"iree-base-compiler==3.10.0,iree-base-runtime==3.10.0"`` -> Toolchain,
    as typed on a command line (``--to`` / ``--from``)."""
    if not isinstance(text, str) or not text.strip():
        raise ToolchainError(f"pins={text!r}: give comma-separated NAME==VERSION pins, "
                             "e.g. iree-base-compiler==3.10.0,iree-base-runtime==3.10.0")
    return Toolchain(tuple(part.strip() for part in text.split(",")))


def current_toolchain() -> Toolchain:
    """The toolchain of this install, read from the installed distributions
    (a local label such as ``+cpu`` dropped: the pin names the release)."""

    found = tool_versions()
    pins = []
    for pin in PINNED:
        name, pinned = _split(pin)
        version = found.get(name, "not installed")
        pins.append(f"{name}=={version.split('+')[0] if version[:1].isdigit() else pinned}")
    return Toolchain(tuple(pins))


def _python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


_PACKAGES = ("fuzz", "strategies", "oracles")


def _source_root() -> Path:
    """The folder holding the harness packages: a checkout, or site-packages
    (from the ``fuzz`` package itself, wherever in it this module lives)."""
    return Path(fuzz.__file__).resolve().parents[1]


def _is_checkout() -> bool:
    """A source checkout (editable install or PYTHONPATH) rather than a wheel
    installed into site-packages, which must not be installed editable: it is
    the folder of every other package too."""
    return (_source_root() / "pyproject.toml").is_file()


def _harness_files() -> list[Path]:
    root = _source_root()
    return sorted(path for package in _PACKAGES for path in (root / package).rglob("*.py"))


def _harness_identity() -> str:
    """What the environment's harness is: a checkout's path (editable, live),
    or the content hash of an installed wheel's packages (copied, so a changed
    install must rebuild)."""
    if _is_checkout():
        return str(_source_root())
    digest = hashlib.sha256()
    for path in _harness_files():
        digest.update(str(path.relative_to(_source_root())).encode() + b"\0" + path.read_bytes())
    return "wheel:" + digest.hexdigest()[:16]


def _default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dlrm-fuzz" / "toolchains"


def _python_in(venv: Path) -> Path:
    return venv / "bin" / "python"


def _record(toolchain: Toolchain) -> dict[str, object]:
    return {"pins": list(toolchain.resolved()), "python": _python_version(),
            "source": _harness_identity()}


def _cached(venv: Path, toolchain: Toolchain) -> bool:
    """Reuse only a finished environment whose recorded pins are these."""
    try:
        recorded = json.loads((venv / _META).read_text())
    except (OSError, ValueError):
        return False
    return recorded == _record(toolchain) and _python_in(venv).exists()


def environment(toolchain: Toolchain, root: Path | None = None) -> Path:
    """The Python of ``toolchain``'s environment, built with uv on first use.

    Built in a temporary folder beside the cache entry and renamed into place,
    so an interrupted build never looks finished and two racing builds leave
    one good environment."""
    if not isinstance(toolchain, Toolchain):
        raise TypeError(f"toolchain={toolchain!r}: expected a Toolchain (see parse_pins)")
    if toolchain.path:
        raise TypeError(f"toolchain={toolchain.path!r}: named by path; "
                        "fuzz.regress.toolchain_path.prepare runs it")
    root = Path(root) if root is not None else _default_root()
    venv = root / toolchain.key()
    if _cached(venv, toolchain):
        return _python_in(venv)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{venv.name}-", dir=root))
    try:
        _build(staging, toolchain)
        if venv.exists():  # stale or half-kept: replace it
            shutil.rmtree(venv)
        try:
            staging.rename(venv)
        except OSError:
            if not _cached(venv, toolchain):  # lost a race to a broken entry
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _python_in(venv)


def _build(venv: Path, toolchain: Toolchain, pins: Sequence[str] | None = None) -> None:
    """uv environment at ``venv``: the harness plus ``pins`` (default: the
    toolchain's resolved pins; ``fuzz.regress.toolchain_path`` passes wheel files as
    ``NAME @ file://...``) with the rest of the toolchain pinned."""
    uv = _uv_bin()
    env = _uv_environ()
    _uv(["venv", "--quiet", "--relocatable", "--python", sys.executable, str(venv)],
        uv, env, toolchain)
    overrides = venv / "overrides.txt"
    # Overrides, not requirements: an override is how uv lets a pin win over
    # a dependency's own range (a local build's version may lie outside it).
    overrides.write_text("\n".join(toolchain.resolved() if pins is None else pins) + "\n")
    install = ["pip", "install", "--quiet", "--python", str(_python_in(venv)), *_pip_settings(),
               "--override", str(overrides)]
    if _is_checkout():
        _uv([*install, "--editable", str(_source_root())], uv, env, toolchain)
    else:
        requirements = venv / "requirements.txt"
        requirements.write_text("\n".join(_wheel_requirements()) + "\n")
        _uv([*install, "--requirement", str(requirements)], uv, env, toolchain)
        _copy_harness(venv)
    (venv / _META).write_text(json.dumps(_record(toolchain), indent=2) + "\n")


def _copy_harness(venv: Path) -> None:
    """Today's harness packages into the environment's site-packages."""
    site = subprocess.run([str(_python_in(venv)), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for path in _harness_files():
        target = Path(site) / path.relative_to(_source_root())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def _uv(args: list[str], uv: str, env: dict[str, str], toolchain: Toolchain) -> None:
    try:
        done = subprocess.run([uv, *args], env=env, capture_output=True, text=True,
                              timeout=_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"{toolchain.describe()}: uv took over {_BUILD_TIMEOUT_S:.0f}s; "
                             "check the network and the package index") from exc
    if done.returncode != 0:
        raise ToolchainError(_install_failure(toolchain, done.stderr or done.stdout))


def _install_failure(toolchain: Toolchain, text: str) -> str:
    """One line: the pin uv blames (or all moved pins), uv's reason, the fix."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = next((line for line in lines if "no version of" in line), None)
    if reason is not None:  # "cause: Because there is no version of X==Y and ..."
        reason = re.sub(r"^(cause:\s*)?Because\s+", "", reason).split(" and ")[0].rstrip(",.")
    else:
        reason = next((line for line in lines if line.startswith("error")),
                      lines[0] if lines else "no message")
    blamed = [pin for pin in toolchain.resolved() if pin in text] or list(toolchain.pins)
    name = _split(blamed[0])[0] if blamed else "PACKAGE"
    return (f"{','.join(blamed) or toolchain.describe()}: does not install (uv: {reason}); "
            f"check the version with `pip index versions {name}`")


def run_in(toolchain: Toolchain, args: Sequence[str], root: Path | None = None,
           timeout_s: float = 3600.0) -> subprocess.CompletedProcess[str]:
    """``python -m fuzz ARGS`` inside ``toolchain``'s environment; output
    captured."""
    return run_with(environment(toolchain, root), args, timeout_s)


def run_with(python: Path | str, args: Sequence[str], timeout_s: float = 3600.0,
             pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    """``PYTHON -m fuzz ARGS``, output captured. PYTHONPATH is dropped so this
    install's packages cannot leak into another toolchain's environment
    (``pythonpath``: only this checkout, for an environment without dlrm-fuzz)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([str(python), "-m", "fuzz", *args], env=env, capture_output=True,
                          text=True, timeout=timeout_s)


def toolchain_from(text: str) -> Toolchain:
    """A toolchain from a command line: comma-separated pins, a folder (a
    virtual environment or wheels: ``fuzz.regress.toolchain_path``), or the path of a
    constraints file (``constraints.txt``: its ``NAME==VERSION`` lines) or of
    a ``pyproject.toml`` whose pinned dependencies are read (a bump workflow
    compares the base branch's file with the PR's)."""
    path = Path(text)
    if "==" not in text and not text.endswith((".toml", ".txt")):
        if not path.is_dir():
            raise ToolchainError(f"toolchain={text!r}: no such folder; give a virtual "
                                 "environment or a folder of wheels, NAME==VERSION pins, or a "
                                 "constraints.txt")
        return Toolchain(path=str(path.expanduser().absolute()))
    if text.endswith((".toml", ".txt")):
        if not path.is_file():
            raise ToolchainError(f"pins={text!r}: no such file; give NAME==VERSION pins, a "
                                 "constraints.txt or a pyproject.toml")
        try:
            lines = pinned_lines(path)
        except (OSError, ValueError) as exc:
            raise ToolchainError(f"pins={text!r}: not a readable pin file ({exc}); "
                                 "fix the file or give NAME==VERSION pins") from None
        names = {_split(pin)[0] for pin in PINNED}
        pins = tuple(line for line in lines
                     if is_pin(line) and _split(line)[0] in names)
        return Toolchain(pins)
    return parse_pins(text)


def constraints_pins(path: Path) -> tuple[str, ...]:
    """The exact toolchain pins of a constraints file, as written."""
    return toolchain_from(str(path)).pins


def same_toolchain(a: Toolchain, b: Toolchain) -> bool:
    """Do ``a`` and ``b`` resolve to the same pins (or name the same folder)?"""
    return (a.path, a.resolved()) == (b.path, b.resolved())
