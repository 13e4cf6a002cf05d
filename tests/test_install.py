"""Installing dlrm-fuzz is not installing a toolchain: pyproject.toml names
ranges, constraints.txt the tested pins. A real uv environment holding another
IREE release keeps it when the project is pip-installed into it, runs a
campaign there, and every stored case says which build ran (marked pipeline:
uv and the package index, about 10 s with uv's wheel cache warm)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz.regress import toolchains
from fuzz.targets.versions import build_identity, recorded_versions, tool_versions

ROOT = Path(__file__).resolve().parents[1]
OLDER = ("iree-base-compiler==3.12.0", "iree-base-runtime==3.12.0")


def test_cases_record_what_identifies_a_local_build() -> None:
    identity = build_identity()
    assert identity["python"] == sys.executable
    assert identity["iree-compile --version"].startswith("IREE compiler version ")
    assert " @ " in identity["iree-compile --version"]  # the revision
    assert Path(identity["torch-mlir location"]).name == "torch_mlir"
    # Paths stay out of what cache keys and Ray's version check compare.
    assert set(identity).isdisjoint(tool_versions())
    assert recorded_versions() == {**tool_versions(), **identity}


def _uv(*args: str) -> None:
    done = subprocess.run([toolchains._uv_bin(), *args], env=toolchains._uv_environ(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr


def _versions(python: Path, *names: str) -> list[str]:
    probe = subprocess.run([str(python), "-c", "import importlib.metadata as m, sys; "
                            "print(*(m.version(n) for n in sys.argv[1:]))", *names],
                           capture_output=True, text=True, check=True)
    return probe.stdout.split()


@pytest.mark.slow  # 28 s in CI's run: a uv environment and a pip install
@pytest.mark.pipeline
def test_pip_install_into_an_older_iree_keeps_it(tmp_path: Path, toolchain_root: Path) -> None:
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    start = time.monotonic()
    _uv("venv", "--quiet", "--seed", "--python", sys.executable, str(venv))
    _uv("pip", "install", "--quiet", "--python", str(python), *toolchains._pip_settings(),
        *OLDER, "torch==2.13.0", "torch-mlir==20261001")
    built = time.monotonic() - start
    # The README's "your own environment" install: no constraints file.
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", str(ROOT)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    installed = time.monotonic() - start - built
    assert _versions(python, "iree-base-compiler", "iree-base-runtime", "dlrm-fuzz") == [
        "3.12.0", "3.12.0", "0.1.0"]

    store = tmp_path / "corpus"
    run = subprocess.run([str(python), "-m", "fuzz", "run", "--targets", "fake-raise",
                          "--budget", "5s", "--max-samples", "2", "--workers", "1",
                          "--no-shrink", "--no-report", "--no-cache", "--corpus", str(store)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    (case,) = store.glob("*/case.json")
    recorded = json.loads(case.read_text())["tool_versions"]
    assert recorded["iree-base-compiler"] == "3.12.0"
    assert "IREE compiler version 3.12" in recorded["iree-compile --version"]
    assert recorded["python"] == str(python)
    assert Path(recorded["torch-mlir location"]).is_relative_to(venv)
    print(f"\nIREE 3.12 venv: built {built:.1f}s, pip install -e {installed:.1f}s, "
          f"kept {recorded['iree-base-compiler']}")
