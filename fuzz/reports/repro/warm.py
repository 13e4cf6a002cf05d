"""Repro checks without the imports: each process that checks repros keeps
one warm server (``warm_server.py``, started as ``python -I``: it imports the
toolchain, never dlrm-fuzz) and has it fork the run of each ``repro.py``, as
``python -I repro.py`` would run in its folder.

Why: ~2.7 s of a repro check's 4-8 s (2 cores) are the imports of torch,
torch-mlir and IREE, and a 10-minute campaign checks ~30 repros in the same
workers as its samples. What stays the same as a fresh interpreter: the
script, its folder, its argv, its environment, its exit status and output,
dlrm-fuzz absent. What differs: the toolchain's modules are imported before
the script's first line, so a script that used a module it never imports
would pass here; the repro tests run every form in a fresh interpreter
without dlrm-fuzz (``tests/test_repro.py``), and ``DLRM_FUZZ_COLD_REPROS=1``
turns the warm server off (every check a fresh ``python -I repro.py``)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

__all__ = ["run_warm", "COLD_ENV"]

COLD_ENV = "DLRM_FUZZ_COLD_REPROS"
_SERVER = Path(__file__).with_name("warm_server.py")
# The server's imports on a loaded machine (~3 s alone on 2 cores).
_START_S = 120.0
# Beyond a check's own timeout (the server kills the check at it): the answer's way back.
_ANSWER_SLACK_S = 30.0


class _Server:
    """One warm server and its pipes; a request at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-I", str(_SERVER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lock = threading.Lock()
        if self._answer(_START_S) is None:
            self.close()
            raise OSError(f"the warm repro server did not start within {_START_S:.0f} s")

    def _answer(self, timeout_s: float) -> dict[str, object] | None:
        """The server's next answer line, or None (it ended, or ``timeout_s`` passed)."""
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                return None
        line = stdout.readline()
        try:
            answer = json.loads(line) if line else None
        except json.JSONDecodeError:
            return None
        return answer if isinstance(answer, dict) else None

    def run(self, folder: Path, timeout_s: float, env: dict[str, str], out: Path) -> int | None:
        """The exit status of ``repro.py`` in ``folder`` (its output in ``out``),
        or None when the server failed (the caller runs the check cold)."""
        stdin = self.process.stdin
        assert stdin is not None
        with self.lock:
            try:
                stdin.write(json.dumps({"folder": str(folder), "out": str(out),
                                        "timeout_s": timeout_s, "env": env}) + "\n")
                stdin.flush()
            except (BrokenPipeError, OSError):
                return None
            answer = self._answer(timeout_s + _ANSWER_SLACK_S)
        code = None if answer is None else answer.get("code")
        return code if isinstance(code, int) else None

    def close(self) -> None:
        """End the server (it exits at the end of its stdin; killed if it does not)."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


# One server per process (this interpreter's): a forked worker starts its own.
_servers: dict[int, _Server] = {}


def run_warm(folder: Path, timeout_s: float, env: dict[str, str]) -> tuple[int, str] | None:
    """Run ``folder/repro.py`` through this process's warm server (this
    interpreter's): (exit status, output; 124 when it ran past ``timeout_s``),
    or None where the warm server is off (``COLD_ENV``) or failed, so the
    caller runs a fresh interpreter."""
    if os.environ.get(COLD_ENV, "") not in ("", "0"):
        return None
    key = os.getpid()
    server = _servers.get(key)
    if server is None or server.process.poll() is not None:
        try:
            server = _servers[key] = _Server()
        except OSError:
            _servers.pop(key, None)
            return None
    handle, name = tempfile.mkstemp(prefix="dlrm-fuzz-repro-", suffix=".out")
    os.close(handle)
    out = Path(name)
    try:
        code = server.run(folder.resolve(), timeout_s, env, out)
        if code is None:  # the server is gone or stuck: the next check starts another
            _servers.pop(key, None)
            server.close()
            return None
        text = out.read_text(errors="replace") if out.exists() else ""
    finally:
        out.unlink(missing_ok=True)
    return code, text
