"""User-defined targets plugged in from the user's own module: loaded by
``module:factory`` (CLI and API), listed by ``dlrm-fuzz targets``, usable in
a campaign, and every way of getting it wrong is a one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuzz.targets.plugins import PluginError, load_plugins, target_table
from fuzz.targets.catalog import FakeTarget, IreeTarget

PLUGIN = textwrap.dedent("""
    from fuzz.targets.catalog import FakeTarget, IreeTarget

    def make_targets():
        return [
            IreeTarget("my-cpu-O3", "iree-cpu with -O3", backend="llvm-cpu", driver="local-task",
                       flags=("--iree-llvmcpu-target-cpu=host", "--iree-opt-level=O3")),
            FakeTarget("my-fake-ok", "FAKE plugin target for engine tests", behaviour="ok"),
        ]

    def one():
        return FakeTarget("my-single", "FAKE single", behaviour="ok")

    def clash():
        return FakeTarget("iree-cpu", "tries to replace a built-in")

    def junk():
        return ["not a target"]

    def boom():
        raise RuntimeError("plugin exploded")
""")


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "my_targets.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_factory_targets_join_the_table(plugin_dir: Path) -> None:
    table = target_table(["my_targets:make_targets", "my_targets:one"], entry_points=False)
    assert isinstance(table["my-cpu-O3"], IreeTarget)
    assert "--iree-opt-level=O3" in table["my-cpu-O3"].flags  # type: ignore[attr-defined]
    assert isinstance(table["my-single"], FakeTarget)
    assert "iree-cpu" in table and "eager-f64" in table


@pytest.mark.parametrize("spec, message", [
    ("my_targets", "write it as module:factory"),
    ("no_such_module:f", "cannot import 'no_such_module'"),
    ("my_targets:missing", "has no callable 'missing'"),
    ("my_targets:clash", "target name 'iree-cpu' is already taken"),
    ("my_targets:junk", "returned str, not a fuzz.targets.catalog.Target"),
    ("my_targets:boom", "its factory raised RuntimeError: plugin exploded"),
])
def test_plugin_errors_are_one_line(plugin_dir: Path, spec: str, message: str) -> None:
    with pytest.raises(PluginError, match=message) as info:
        load_plugins([spec], entry_points=False)
    assert "\n" not in str(info.value)


def _cli(plugin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin_dir), os.getcwd()]))
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          env=env, timeout=600, cwd=plugin_dir)


@pytest.mark.engine
def test_cli_lists_and_runs_plugin_targets(plugin_dir: Path) -> None:
    listing = _cli(plugin_dir, "targets", "--target-plugin", "my_targets:make_targets")
    assert listing.returncode == 0, listing.stderr
    assert "my-cpu-O3" in listing.stdout and "my-fake-ok" in listing.stdout
    run = _cli(plugin_dir, "run", "--target-plugin", "my_targets:make_targets", "--targets",
               "my-fake-ok", "--max-samples", "2", "--workers", "1", "--no-cache",
               "--corpus", str(plugin_dir / "corpus"))
    assert run.returncode == 0, run.stderr
    assert "my-fake-ok" in run.stdout and "samples" in run.stdout
    bad = _cli(plugin_dir, "targets", "--target-plugin", "my_targets:boom")
    assert bad.returncode == 2 and "plugin exploded" in bad.stderr
    assert "Traceback" not in bad.stderr
