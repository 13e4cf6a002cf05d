"""``--toolchain PATH`` (fuzz.regress.toolchain_path): a toolchain that cannot run is
one line and exit 2; a runnable one gets the command re-executed in its
interpreter (proved by the interpreter each stored case records), for
``run`` and for both sides of ``bump``. The environment used here is a venv
whose site-packages point at this interpreter's (a .pth file): cheap, and a
different ``sys.executable``. A real folder of IREE 3.12 wheels is marked
slow (the index and uv, about 27 s)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from fuzz.cli.main import main
from fuzz.regress.toolchain_path import MARKER, Prepared, child_command, prepare, strip_option
from fuzz.regress.toolchains import ToolchainError, toolchain_from

ROOT = Path(__file__).resolve().parents[1]
FAKE_RUN = ("--targets", "fake-raise", "--budget", "5s", "--max-samples", "1", "--workers", "1",
            "--no-replay", "--no-shrink", "--no-report", "--no-cache")


def _venv(where: Path, packages: bool) -> Path:
    """A venv of this Python; ``packages``: this interpreter's site-packages
    visible through a .pth file (torch, torch-mlir, IREE, but not dlrm-fuzz)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    if packages:
        site = Path(subprocess.run([str(where / "bin" / "python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        (site / "host.pth").write_text(str(_host_packages_without_us(where.parent)) + "\n")
    return where


OURS = ("fuzz", "strategies", "oracles")


def _host_packages_without_us(where: Path) -> Path:
    """This interpreter's site-packages as a folder of links, less dlrm-fuzz
    itself: under tox dlrm-fuzz is installed there (not editable), and the
    toolchain must look like one that lacks it."""
    folder = where / "host-site-packages"
    if not folder.exists():
        folder.mkdir()
        for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
            if entry.name in OURS or entry.name.lower().startswith(("dlrm_fuzz", "__editable__")):
                continue
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def host_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _venv(tmp_path_factory.mktemp("toolchain") / "venv", packages=True)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env={**_clean_env(), "PYTHONPATH": str(ROOT)})


def _clean_env() -> dict[str, str]:
    import os
    return {k: v for k, v in os.environ.items() if k not in (MARKER, "PYTHONPATH")}


@pytest.mark.engine
@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "nope", "no such folder"),
    (lambda tmp: (tmp / "file").write_text("x") and tmp / "file", "not a folder"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "neither a virtual environment"),
    (lambda tmp: _venv(tmp / "bare", packages=False), "does not import there"),
])
def test_a_toolchain_that_cannot_run_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, words: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    for command in (["run"], ["replay", str(tmp_path)], ["matrix"], ["repro", "some-bucket"]):
        assert main([*command, "--toolchain", str(path)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("dlrm-fuzz: error:")
    if words == "does not import there":  # names the packages and the fix
        assert "torch, torch_mlir.fx, iree.compiler, iree.runtime" in err
        assert f"{path}/bin/python -m pip install torch torch-mlir" in err


def test_strip_option_and_child_command(tmp_path: Path) -> None:
    argv = ["run", "--toolchain", "/env", "--seed", "3", "--toolchain=/env", "--budget", "5s"]
    assert strip_option(argv) == ["run", "--seed", "3", "--budget", "5s"]
    ready = Prepared(tmp_path, tmp_path / "bin" / "python", str(ROOT))
    assert child_command(ready, argv)[:4] == [str(tmp_path / "bin" / "python"), "-m", "fuzz",
                                              "run"]
    env = ready.environ()
    assert env["PYTHONPATH"] == str(ROOT) and env[MARKER] == str(tmp_path)


@pytest.mark.engine
def test_a_toolchain_without_dlrm_fuzz_runs_this_checkout(host_venv: Path) -> None:
    ready = prepare(host_venv)
    assert ready.python == host_venv / "bin" / "python"
    assert ready.pythonpath == str(ROOT)  # the venv lacks dlrm-fuzz
    assert ready.versions["torch-mlir"] == "20261001"


@pytest.mark.engine
def test_run_is_re_executed_in_the_toolchain(host_venv: Path, tmp_path: Path) -> None:
    store = tmp_path / "corpus"
    start = time.monotonic()
    done = _cli("run", "--toolchain", str(host_venv), *FAKE_RUN, "--corpus", str(store),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"toolchain {host_venv}: {host_venv}/bin/python" in done.stderr
    (case,) = store.glob("*/case.json")
    recorded = json.loads(case.read_text())["tool_versions"]
    assert recorded["python"] == str(host_venv / "bin" / "python") != sys.executable
    print(f"\nrun --toolchain (venv): {time.monotonic() - start:.1f}s")


@pytest.mark.engine
def test_bump_takes_a_path_on_both_sides(host_venv: Path, tmp_path: Path) -> None:
    store, out = tmp_path / "corpus", tmp_path / "out"
    seeded = _cli("run", *FAKE_RUN, "--corpus", str(store), cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    assert toolchain_from(str(host_venv)).describe() == str(host_venv)
    done = _cli("bump", "--from", str(host_venv), "--to", str(host_venv), "--corpus", str(store),
                "--out", str(out), "--budget", "0s", "--workers", "1", "--repeat", "1",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads((out / "bump.json").read_text())
    assert [row["change"] for row in data["rows"]] == ["still-failing"]
    for side in data["sides"]:
        assert side["path"] == str(host_venv) and not side["reused_install"]
        assert side["versions"]["python"] == str(host_venv / "bin" / "python")


def test_bump_path_that_is_not_a_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="no such folder"):
        toolchain_from(str(tmp_path / "missing-env"))


@pytest.mark.slow  # about 27 s: a download, a uv build, a campaign
@pytest.mark.pipeline
def test_a_folder_of_wheels_becomes_a_cached_environment(tmp_path: Path,
                                                         toolchain_root: Path) -> None:
    """Real IREE 3.12.0 wheels (pip download from the index): the folder is
    built into a uv environment once, the campaign runs there and records it."""
    wheels = tmp_path / "wheels"
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                          "-d", str(wheels), "iree-base-compiler==3.12.0",
                          "iree-base-runtime==3.12.0"], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"IREE 3.12.0 wheels not downloadable here: {got.stderr.strip()[-200:]}")
    start = time.monotonic()
    ready = prepare(wheels, toolchain_root)
    built = time.monotonic() - start
    assert ready.versions["iree-base-compiler"] == "3.12.0"
    assert ready.versions["torch-mlir"] == "20261001"  # today's pin for what the folder lacks
    assert ready.pythonpath is None  # the harness is installed there
    start = time.monotonic()
    assert prepare(wheels, toolchain_root).python == ready.python  # cached
    cached = time.monotonic() - start
    # The command line builds under ~/.cache/dlrm-fuzz/toolchains; the test
    # keeps to its own root and hands the CLI the environment it built.
    store = tmp_path / "corpus"
    done = _cli("run", "--toolchain", str(ready.python.parents[1]), *FAKE_RUN,
                "--corpus", str(store), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (case,) = store.glob("*/case.json")
    recorded = json.loads(case.read_text())["tool_versions"]
    assert recorded["iree-base-compiler"] == "3.12.0"
    assert "IREE compiler version 3.12" in recorded["iree-compile --version"]
    print(f"\nwheel folder: built {built:.1f}s, cached check {cached:.1f}s")
