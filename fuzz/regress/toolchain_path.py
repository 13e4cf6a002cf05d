"""``--toolchain PATH``: run a command in another environment's interpreter.

The person validating a lowering has a torch-mlir or IREE build of their own,
installed in a virtual environment, or as wheel files. Pins cannot name it, so
``run``, ``replay``, ``matrix`` and ``repro`` take the environment by path, and
``bump --from PATH --to PATH`` takes one per side. The sound way to make every
worker import that toolchain is to be that interpreter: the command line is
executed again as ``PATH/bin/python -m fuzz ...`` (same arguments, same
folder, same exit status and signals, since the process is replaced), after
checking that the interpreter imports the toolchain and the harness. A folder
of wheels becomes a cached uv environment first (``fuzz.regress.toolchains``: the
wheels, today's pins for the packages they do not provide, and this harness).
An environment without dlrm-fuzz runs this checkout's harness through
PYTHONPATH. Whatever cannot run is one line naming the problem and the fix.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from fuzz.regress import toolchains
from fuzz.regress.toolchains import PINNED, Toolchain, ToolchainError

__all__ = ["MARKER", "Prepared", "already_inside", "child_command", "prepare", "reexec",
           "strip_option"]

# Set in the re-executed command's environment to the toolchain it runs in:
# the child recognises it is already there (a guard against re-executing in
# a loop) and the folder shows in its records.
MARKER = "DLRM_FUZZ_TOOLCHAIN"
_META = "dlrm-fuzz-wheels.json"
# What a harness process imports: the toolchain (torch_mlir.fx, not just the
# namespace, so a build against another torch fails here), then the harness's
# own dependencies. Module -> the distribution that provides it.
_NEEDED = {"torch": "torch", "torch_mlir.fx": "torch-mlir", "iree.compiler": "iree-base-compiler",
           "iree.runtime": "iree-base-runtime", "hypothesis": "hypothesis", "numpy": "numpy",
           "rich": "rich"}
_PROBE = """
import importlib, importlib.util, json, sys
from importlib import metadata
out = {"missing": {}, "versions": {}}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        out["missing"][name] = (type(exc).__name__ + ": " + str(exc)).splitlines()[0][:200]
for dist in ("torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime"):
    try:
        out["versions"][dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        out["versions"][dist] = "not installed"
out["fuzz"] = importlib.util.find_spec("fuzz") is not None
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Prepared:
    """An interpreter that runs dlrm-fuzz on the toolchain at ``path``."""

    path: Path  # what the user named (a venv or a folder of wheels)
    python: Path
    pythonpath: str | None = None  # this checkout, for an environment without dlrm-fuzz
    versions: dict[str, str] = field(default_factory=dict)

    def environ(self) -> dict[str, str]:
        """The child's environment: this one without PYTHONPATH / PYTHONHOME
        (this install's packages must not leak in), plus the marker."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        env[MARKER] = str(self.path)
        return env


def _fix_for(python: Path) -> str:
    return f"`{python} -m pip install -c constraints.txt -e {toolchains._source_root()}`" \
        if toolchains._is_checkout() else f"`{python} -m pip install dlrm-fuzz`"


def prepare(path: Path | str, root: Path | None = None) -> Prepared:
    """Check ``path`` (a virtual environment, or a folder of ``*.whl`` to build
    one from with uv, cached under ``root``) and say how to run there.
    Raises :class:`ToolchainError` (one line) when it cannot run."""
    folder = Path(path).expanduser().absolute()
    if not folder.exists():
        raise ToolchainError(f"toolchain={str(path)!r}: no such folder; give a virtual "
                             "environment (a folder with bin/python) or a folder of wheels")
    if not folder.is_dir():
        raise ToolchainError(f"toolchain={str(path)!r}: not a folder; give a virtual environment "
                             "(a folder with bin/python) or the folder holding the wheels")
    python = folder / "bin" / "python"
    if not python.exists():
        wheels = sorted(folder.glob("*.whl"))
        if not wheels:
            raise ToolchainError(
                f"toolchain={str(path)!r}: neither a virtual environment (no bin/python) nor a "
                f"folder of wheels (no *.whl); make one with `python3.11 -m venv {path}` and "
                "install your torch-mlir / IREE build into it")
        python = _wheel_environment(folder, wheels, root)
    return _checked(folder, python)


def _checked(folder: Path, python: Path) -> Prepared:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:  # cwd: a neutral folder, so a checkout in the cwd is not what is found
        done = subprocess.run([str(python), "-c", _PROBE, *_NEEDED], capture_output=True,
                              text=True, timeout=300, env=env, cwd=tempfile.gettempdir())
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        raise ToolchainError(f"toolchain={str(folder)!r}: {python} does not run "
                             f"({type(exc).__name__}); recreate the environment with "
                             f"`python3.11 -m venv {folder}`") from None
    missing: dict[str, str] = found["missing"]
    if missing:
        first = next(iter(missing))
        dists = " ".join(dict.fromkeys(_NEEDED[name] for name in missing))
        harness_only = all(_NEEDED[name] in ("hypothesis", "numpy", "rich") for name in missing)
        fix = _fix_for(python) if harness_only else \
            f"`{python} -m pip install {dists}` (or your build's wheels)"
        raise ToolchainError(f"toolchain={str(folder)!r}: {', '.join(missing)} does not import "
                             f"there ({missing[first]}); install it with {fix}")
    pythonpath = None
    if not found["fuzz"]:
        if not toolchains._is_checkout():
            raise ToolchainError(f"toolchain={str(folder)!r}: dlrm-fuzz is not installed there; "
                                 f"install it with {_fix_for(python)}")
        pythonpath = str(toolchains._source_root())
    return Prepared(folder, python, pythonpath, dict(found["versions"]))


# -- a folder of wheels -> a cached uv environment ------------------------------
_WHEEL = re.compile(r"([A-Za-z0-9_.]+)-([0-9][^-]*)-.+\.whl")


def _wheel_environment(folder: Path, wheels: list[Path], root: Path | None) -> Path:
    """The Python of an environment built from ``wheels`` (plus today's pins
    for the toolchain packages they do not provide), built once per set of
    wheel files (names, sizes, times) and harness."""
    pins, overrides = [], {}
    for wheel in wheels:
        match = _WHEEL.fullmatch(wheel.name)
        if not match:
            raise ToolchainError(f"toolchain={str(folder)!r}: {wheel.name} is not a wheel file "
                                 "name (NAME-VERSION-...-PLATFORM.whl); rename or remove it")
        name = toolchains._canonical(match.group(1))
        if name in overrides:
            raise ToolchainError(f"toolchain={str(folder)!r}: two wheels of {name}; keep one")
        pins.append(f"{name}=={match.group(2)}")
        overrides[name] = f"{name} @ {wheel.as_uri()}"
    today = {toolchains._split(pin)[0]: pin for pin in PINNED}
    lines = [*overrides.values(), *(pin for name, pin in today.items() if name not in overrides)]
    stamp = [(w.name, w.stat().st_size, w.stat().st_mtime_ns) for w in wheels]
    record = {"wheels": stamp, "python": toolchains._python_version(),
              "source": toolchains._harness_identity()}
    key = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]
    base = Path(root) if root is not None else toolchains._default_root()
    venv = base / f"wheels-{key}"
    if (venv / "bin" / "python").exists() and (venv / _META).is_file():
        return venv / "bin" / "python"
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{venv.name}-", dir=base))
    try:  # built aside and renamed: an interrupted build never looks finished
        toolchains._build(staging, Toolchain(tuple(pins)), lines)
        (staging / _META).write_text(json.dumps(record, indent=2) + "\n")
        if venv.exists():
            shutil.rmtree(venv)
        staging.rename(venv)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return venv / "bin" / "python"


# -- re-executing the command line ----------------------------------------------
def strip_option(argv: Sequence[str], option: str = "--toolchain") -> list[str]:
    """``argv`` without ``--toolchain PATH`` / ``--toolchain=PATH``."""
    out: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token == option:
            skip = True
        elif not token.startswith(option + "="):
            out.append(token)
    return out


def child_command(prepared: Prepared, argv: Sequence[str]) -> list[str]:
    """The command that runs ``argv`` in ``prepared``'s interpreter."""
    return [str(prepared.python), "-m", "fuzz", *strip_option(argv)]


def already_inside(path: Path | str) -> bool:
    """Is this process the re-executed command for ``path``?"""
    return os.environ.get(MARKER) == str(Path(path).expanduser().absolute())


def reexec(path: Path | str, argv: Sequence[str], say: Callable[[str], None]) -> NoReturn:
    """Replace this process with ``argv`` run in ``path``'s interpreter."""
    prepared = prepare(path)
    command = child_command(prepared, argv)
    say(f"dlrm-fuzz: toolchain {prepared.path}: {prepared.python} "
        + ", ".join(f"{k} {v}" for k, v in prepared.versions.items())
        + (f" (dlrm-fuzz from {prepared.pythonpath})" if prepared.pythonpath else ""))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], command, prepared.environ())

