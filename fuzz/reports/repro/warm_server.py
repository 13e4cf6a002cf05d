"""The warm repro server: started as ``python -I warm_server.py`` by
``fuzz.reports.repro.warm``, it imports the toolchain a repro imports (never
dlrm-fuzz: this file imports the standard library only, and ``-I`` keeps its
folder off ``sys.path``) and then, for each request on stdin, forks a child
that runs one ``repro.py`` exactly as ``python -I repro.py`` would in its
folder: ``__main__``, ``sys.argv`` and ``sys.orig_argv`` of that command
(a supervised repro re-runs itself with them), the request's environment,
its own session, stdout and stderr into the request's file. Its answer is the
child's exit status as ``subprocess`` gives it (negative: killed by that
signal; 124: past the request's timeout, its whole session killed).

Why: a repro check in a fresh interpreter spends ~2.7 s importing torch,
torch-mlir and IREE before its first line of work (4-8 s in all, 2 cores),
once per report job, ~30 per 10-minute campaign.

Requests and answers are JSON lines: ``{"folder", "out", "timeout_s",
"env"}`` in, ``{"code"}`` out. The server exits at the end of its stdin (its
worker ended)."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback
from typing import Any

# What the repros import (fuzz.reports.repro.core.ALLOWED_IMPORTS), the
# costly ones. One that fails to import is left to the repro to meet.
PRELOAD = ("numpy", "torch", "torch_mlir.fx", "iree.compiler", "iree.runtime")


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become ``python -I repro.py`` in the request's folder; never returns."""
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(request["folder"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["repro.py"]
        sys.orig_argv = [sys.executable, "-I", "repro.py"]
        try:
            runpy.run_path("repro.py", run_name="__main__")
            code = 0
        except SystemExit as stop:
            if stop.code is None:
                code = 0
            elif isinstance(stop.code, int):
                code = stop.code & 0xFF
            else:  # sys.exit("text"): printed, status 1, as the interpreter does
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:  # an uncaught exception: its traceback, status 1
            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _wait(pid: int, timeout_s: float) -> int:
    """The child's exit status as subprocess reports it; 124 when it ran past
    ``timeout_s`` (then its whole session is killed)."""
    end = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() >= end:
            for kill in (os.killpg, os.kill):  # its session; itself, if not yet its own
                try:
                    kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.waitpid(pid, 0)
            return 124
        time.sleep(delay)
        delay = min(0.05, delay * 2)


def main() -> None:
    """Import the toolchain, say ready, then fork one child per request until stdin ends."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    answers = sys.stdout
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"code": _wait(pid, float(request["timeout_s"]))}), file=answers, flush=True)


if __name__ == "__main__":
    main()
