"""The warm repro server (``fuzz.reports.repro.warm``): a repro forked from it
behaves as ``python -I repro.py`` in its folder would (status, output,
folder, argv, environment, no dlrm-fuzz), a hang is killed at its timeout,
and ``DLRM_FUZZ_COLD_REPROS=1`` runs every check fresh. Plain scripts: the
forms' own repros run fresh in tests/test_repro.py and through this server
in every campaign test that writes a report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzz.reports.repro import run_repro
from fuzz.reports.repro import warm
from fuzz.reports.repro.warm import COLD_ENV, run_warm

pytestmark = pytest.mark.engine


def _script(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "repro.py").write_text(text)
    return folder


def _warm(folder: Path, timeout_s: float = 60) -> tuple[int, str]:
    result = run_warm(folder, timeout_s, {**os.environ, "REPRO_PROBE": "42"})
    assert result is not None, "the warm server did not run the check"
    return result


def test_a_warm_repro_runs_as_python_I_repro_py_in_its_folder(tmp_path: Path) -> None:
    folder = _script(tmp_path / "case", "\n".join([
        "import os, sys",
        "import data_beside",  # -I: the script's folder is not on sys.path
    ]) + "\n")
    code, output = _warm(folder)
    assert code == 1 and "ModuleNotFoundError: No module named 'data_beside'" in output, output

    folder = _script(tmp_path / "case2", "\n".join([
        "import os, sys",
        "print('cwd', os.getcwd())",
        "print('argv', sys.argv, sys.orig_argv[1:])",
        "print('probe', os.environ.get('REPRO_PROBE'))",
        "print('fuzz loaded', 'fuzz' in sys.modules, 'torch loaded', 'torch' in sys.modules)",
        "print('to stderr', file=sys.stderr)",
        "print('main', __name__)",
        "sys.exit(3)",
    ]) + "\n")
    code, output = _warm(folder)
    assert code == 3, output
    assert f"cwd {folder.resolve()}" in output
    assert "argv ['repro.py'] ['-I', 'repro.py']" in output
    assert "probe 42" in output and "to stderr" in output and "main __main__" in output
    assert "fuzz loaded False torch loaded True" in output  # the toolchain warm, never dlrm-fuzz


def test_exit_statuses_are_those_of_a_fresh_interpreter(tmp_path: Path) -> None:
    cases = {
        "ends": ("print('ok')\n", 0),
        "raises": ("raise RuntimeError('Tensor dtype mismatch')\n", 1),
        "exits 2": ("import sys\nsys.exit(2)\n", 2),
        "exits with text": ("import sys\nsys.exit('cannot run: no device')\n", 1),
        "aborts": ("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)\n", -6),
    }
    for name, (text, expected) in cases.items():
        folder = _script(tmp_path / name.replace(" ", "_"), text)
        code, output = _warm(folder)
        os.environ[COLD_ENV] = "1"
        try:
            cold = run_repro(folder, timeout_s=60)
        finally:
            del os.environ[COLD_ENV]
        assert code == cold[0] == expected, (name, code, cold, output)
    assert "RuntimeError: Tensor dtype mismatch" in _warm(tmp_path / "raises")[1]
    assert "cannot run: no device" in _warm(tmp_path / "exits_with_text")[1]


def test_a_hanging_repro_is_killed_at_its_timeout_and_the_server_goes_on(tmp_path: Path) -> None:
    hang = _script(tmp_path / "hang", "import subprocess, sys, time\n"
                   "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                   "time.sleep(60)\n")
    code, output = _warm(hang, timeout_s=2)
    assert code == 124, output
    code, output = run_repro(hang, timeout_s=2)  # the check says why, warm or fresh
    assert code == 124 and output.endswith("timed out after 2 s"), output
    servers = set(id(s) for s in warm._servers.values())
    code, _ = _warm(_script(tmp_path / "after", "print('next')\n"))
    assert code == 0 and set(id(s) for s in warm._servers.values()) == servers  # the same server


def test_a_dead_server_is_replaced_and_cold_runs_need_none(tmp_path: Path) -> None:
    folder = _script(tmp_path / "case", "print('hello')\n")
    assert _warm(folder)[0] == 0
    server = warm._servers[os.getpid()]
    server.process.kill()
    server.process.wait()
    assert _warm(folder) == (0, "hello\n")
    assert warm._servers[os.getpid()] is not server
    os.environ[COLD_ENV] = "1"
    try:
        assert run_warm(folder, 60, dict(os.environ)) is None
    finally:
        del os.environ[COLD_ENV]
