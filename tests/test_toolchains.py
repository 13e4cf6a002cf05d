"""fuzz.regress.toolchains: pin parsing and keys (no network), and one real uv
environment for an older IREE (marked pipeline)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from fuzz.regress import toolchains
from fuzz.regress.toolchains import (PINNED, Toolchain, ToolchainError, constraints_pins,
                             current_toolchain, environment, parse_pins, run_in, toolchain_from)

ROOT = Path(__file__).resolve().parents[1]
# The release the real bump and bisect tests use too: one environment for all.
OLDER = "iree-base-compiler==3.12.0,iree-base-runtime==3.12.0"


def test_pinned_matches_constraints() -> None:
    """bump's "pinned" side is the toolchain of constraints.txt, which tox,
    CI and the README's install use; pyproject.toml names ranges only."""
    assert set(constraints_pins(ROOT / "constraints.txt")) == set(PINNED)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if "==" in d], "exact pins belong in constraints.txt"
    names = {pin.split("==")[0] for pin in PINNED}
    assert names <= {re.split(r"[<>=!~ ]", d)[0] for d in deps}


def test_toolchain_from_a_constraints_file(tmp_path: Path) -> None:
    pins = tmp_path / "constraints.txt"
    pins.write_text("# base branch\ntorch==2.13.0\niree-base-compiler == 3.12.0  # old\n"
                    "iree-base-runtime==3.12.0\nrich==13.0\n")
    assert toolchain_from(str(pins)).describe() == OLDER
    with pytest.raises(ToolchainError, match="no such file"):
        toolchain_from(str(tmp_path / "missing.txt"))


def test_parse_pins_overrides_only_named_packages() -> None:
    tc = parse_pins(" iree-base-compiler==3.10.0 , iree_base_runtime==3.10.0")
    resolved = tc.resolved()
    assert "iree-base-compiler==3.10.0" in resolved and "iree-base-runtime==3.10.0" in resolved
    assert "torch==2.13.0" in resolved and "torch-mlir==20261001" in resolved
    assert tc.describe() == "iree-base-compiler==3.10.0,iree-base-runtime==3.10.0"


def test_key_is_stable_and_depends_on_resolved_pins() -> None:
    a, b = parse_pins(OLDER), parse_pins(",".join(reversed(OLDER.split(","))))
    assert a.key() == b.key() and len(a.key()) == 16
    assert a.key() != parse_pins("iree-base-compiler==3.9.0").key()
    # restating today's pins is today's toolchain
    assert Toolchain().key() == parse_pins("torch==2.13.0").key()


def test_current_toolchain_is_the_pinned_one() -> None:
    assert current_toolchain().resolved() == Toolchain().resolved()


@pytest.mark.parametrize("text, words", [
    ("", "NAME==VERSION"),
    ("iree-base-compiler", "iree-base-compiler"),
    ("iree-base-compiler>=3.0", "exact pin"),
    ("iree-base-compiler==3.10.0,iree-base-compiler==3.9.0", "pinned twice"),
    ("torch==2.13.0,,", "exact pin"),
])
def test_bad_pins_are_one_line_errors(text: str, words: str) -> None:
    with pytest.raises(ToolchainError) as info:
        parse_pins(text)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_install_failure_message_names_pin_and_fix() -> None:
    uv_says = ("error: No solution found when resolving dependencies\n  cause: Because there is "
               "no version of iree-base-compiler==9.9.9 and dlrm-fuzz==0.1.0 depends on ...\n")
    message = toolchains._install_failure(parse_pins("iree-base-compiler==9.9.9"), uv_says)
    assert message == ("iree-base-compiler==9.9.9: does not install (uv: there is no version of "
                       "iree-base-compiler==9.9.9); check the version with "
                       "`pip index versions iree-base-compiler`")


def test_version_order_is_numeric() -> None:
    assert sorted(["3.10.0", "2.9.0", "3.9.0", "3.7.1"], key=toolchains._version_key) == [
        "2.9.0", "3.7.1", "3.9.0", "3.10.0"]


@pytest.mark.pipeline
def test_older_iree_environment_builds_runs_and_is_cached(toolchain_root: Path) -> None:
    tmp_path = toolchain_root
    tc = parse_pins(OLDER)
    start = time.monotonic()
    python = environment(tc, tmp_path)
    cold = time.monotonic() - start
    done = run_in(tc, ["--help"], root=tmp_path, timeout_s=300)
    assert done.returncode == 0 and "dlrm-fuzz" in done.stdout, done.stderr
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; "
         "print(m.version('iree-base-compiler'), m.version('iree-base-runtime'), "
         "m.version('torch'))"], capture_output=True, text=True, check=True)
    iree, runtime, torch = probe.stdout.split()
    assert (iree, runtime) == ("3.12.0", "3.12.0")
    assert torch.startswith("2.13.0") and "+cpu" in torch  # the local CPU wheel, never CUDA

    def no_uv() -> str:
        raise AssertionError("a cached environment must not call uv")

    start = time.monotonic()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(toolchains, "_uv_bin", no_uv)
        assert environment(tc, tmp_path) == python
    cached = time.monotonic() - start
    print(f"\ntoolchain {tc.describe()}: cold build {cold:.1f}s, cached {cached * 1000:.1f}ms")
    assert cached < 1.0


@pytest.mark.pipeline
def test_nonexistent_version_is_a_one_line_error(tmp_path: Path, toolchain_root: Path) -> None:
    with pytest.raises(ToolchainError) as info:
        environment(parse_pins("iree-base-compiler==9.9.9"), tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith("iree-base-compiler==9.9.9: does not install")
    assert "pip index versions iree-base-compiler" in message
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing half-built left behind


@pytest.mark.pipeline
def test_an_installed_wheel_gets_a_copy_of_its_harness(tmp_path: Path, toolchain_root: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed from a wheel, the harness lives in site-packages, which must
    not be installed editable: the environment gets the wheel's dependencies
    and a copy of the packages, and a changed harness makes a new environment."""
    monkeypatch.setattr(toolchains, "_is_checkout", lambda: False)
    tc = parse_pins(OLDER)
    python = environment(tc, tmp_path)
    where = subprocess.run([str(python), "-c", "import fuzz, iree.compiler.version as v; "
                            "print(fuzz.__file__); print(v.PACKAGE_SUFFIX, v.VERSION)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    location = Path(where.stdout.splitlines()[0])
    assert location.is_relative_to(python.parents[1]), location  # the copy, not this checkout
    assert "3.12.0" in where.stdout.splitlines()[1]
    assert location.read_bytes() == (ROOT / "fuzz" / "__init__.py").read_bytes()
    before = tc.key()
    monkeypatch.setattr(toolchains, "_harness_files",
                        lambda: [ROOT / "fuzz" / "__init__.py"])  # "another wheel"
    assert tc.key() != before
