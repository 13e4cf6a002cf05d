"""Checks that a test starts only what its tier allows (tests/conftest.py).

A test's tier is its markers: ``engine`` may start worker processes and
subprocesses, ``pipeline`` and ``gpu`` may also compile with torch-mlir /
IREE, ``ray`` may start processes (a local cluster); a test with none of these
is ``unit`` and may start neither. This module watches both in the pytest
process (``multiprocessing`` process starts, ``subprocess.Popen``, the
toolchain's compile entry points) and, imported as ``sitecustomize`` through
``PYTHONPATH``, the compile entry points inside the processes a test spawns:
there each call appends a line to the file ``$DLRM_FUZZ_TIERGUARD_LOG`` names,
which the pytest process reads after each test phase.

Standard library only, no project imports: spawned interpreters (uv
toolchain environments of another IREE release included) import it at start.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import multiprocessing.process
import os
import subprocess
import sys
import threading
from typing import Any, Callable, Sequence

__all__ = ["COMPILE_CALLS", "TOOL_QUERIES", "Policy", "TierViolation", "install", "install_in_child",
           "is_tool_query", "LOG_ENV"]

LOG_ENV = "DLRM_FUZZ_TIERGUARD_LOG"

# The toolchain's entry points every real road goes through: torch-mlir's FX
# import (every target but the fakes and eager), its backend lowering, and
# IREE's compiler API. Wrapped where the module defines them, and looked up
# there at call time by fuzz/targets (imports inside functions).
COMPILE_CALLS: dict[str, tuple[str, ...]] = {
    "torch_mlir.fx": ("export_and_import",),
    "torch_mlir.compiler_utils": ("lower_mlir_module", "run_pipeline_with_repro_report"),
    "iree.compiler.tools.core": ("compile_str", "compile_file"),
    "iree.compiler.tools": ("compile_str", "compile_file"),
    "iree.compiler": ("compile_str", "compile_file"),
}


class TierViolation(BaseException):
    """Raised where a test starts what its tier does not allow, so a
    mis-marked test stops at once instead of starting a pool (a
    BaseException: the code under test's ``except Exception`` lets it by)."""


class Policy:
    """What the phase running now may start, and what it did start."""

    def __init__(self) -> None:
        self.processes = True
        self.compiles = True
        self.tier = ""
        self.violations: list[str] = []
        self.counts: dict[str, int] = {}
        self.started = 0  # processes and subprocesses started, allowed or not
        self.compiled = 0  # compile entry points called in this process
        self._lock = threading.Lock()

    def allow(self, tier: str, processes: bool, compiles: bool) -> None:
        with self._lock:
            self.tier, self.processes, self.compiles = tier, processes, compiles
            self.violations = []
            self.counts = {}

    def note(self, what: str) -> None:
        """Record the first of each kind of start ("started a process (...)"),
        then only count the others: one line per kind in the failure. Raises
        ``TierViolation`` (the conftest reports what was recorded)."""
        kind = what.split(" (", 1)[0]
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if self.counts[kind] == 1:
                self.violations.append(what)
        raise TierViolation(f"a {self.tier} test {what}")

    def report(self) -> list[str]:
        """The violations, each with how many more of its kind followed."""
        found = []
        with self._lock:
            for what in self.violations:
                more = self.counts[what.split(" (", 1)[0]] - 1
                found.append(f"{what} and {more} more" if more else what)
        return found


POLICY = Policy()
_CHILD_LOG: str | None = None  # set in a spawned interpreter: compile calls go to this file


# What a unit test may still run: asking the installed compiler binary what it
# is. fuzz caches each answer per process (a stored case records
# `iree-compile --version`; IREE target availability lists the backends), it
# takes a tenth of a second and compiles nothing.
TOOL_QUERIES = {"iree-compile": ("--version", "--iree-hal-list-target-backends")}


def _argv(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    if isinstance(args, Sequence):
        return [os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else repr(a)
                for a in args]
    return [repr(args)]


def is_tool_query(args: Any) -> bool:
    """``iree-compile --version`` and the like: allowed in every tier."""
    argv = _argv(args)
    allowed = TOOL_QUERIES.get(os.path.basename(argv[0]), ())
    return len(argv) > 1 and all(arg in allowed for arg in argv[1:])


def _describe(args: Any) -> str:
    text = " ".join(_argv(args))
    return text if len(text) <= 120 else text[:117] + "..."


def _compile_called(name: str) -> None:
    if _CHILD_LOG is not None:
        try:
            with open(_CHILD_LOG, "a", encoding="utf-8") as log:
                log.write(f"{name} in a child process (pid {os.getpid()})\n")
        except OSError:
            pass
    else:
        POLICY.compiled += 1
        if not POLICY.compiles:
            POLICY.note(f"called {name} (a real compile)")


def _wrap_compile(module: Any) -> None:
    for attr in COMPILE_CALLS.get(module.__name__, ()):
        original = getattr(module, attr, None)
        if original is None or getattr(original, "_tierguard", False):
            continue
        name = f"{getattr(original, '__module__', module.__name__)}.{attr}"

        def wrapper(*args: Any, __original: Callable[..., Any] = original, __name: str = name,
                    **kwargs: Any) -> Any:
            _compile_called(__name)
            return __original(*args, **kwargs)

        wrapper._tierguard = True  # type: ignore[attr-defined]
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__doc__ = getattr(original, "__doc__", None)
        setattr(module, attr, wrapper)


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the compile entry points wrapped."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)  # type: ignore[attr-defined]
        _wrap_compile(module)

    def __getattr__(self, name: str) -> Any:  # resources, get_source, ...
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the watched toolchain modules through the other finders and
    hands them a loader that wraps their compile entry points."""

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in COMPILE_CALLS or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


_installed = False


def _watch_compiles() -> None:
    sys.meta_path.insert(0, _Finder())
    for name in COMPILE_CALLS:
        if name in sys.modules:
            _wrap_compile(sys.modules[name])


def install() -> Policy:
    """In the pytest process: watch process starts and compiles from now on
    (idempotent); ``POLICY.allow`` sets what the running phase may do."""
    global _installed
    if _installed:
        return POLICY
    _installed = True
    _watch_compiles()

    process_start = multiprocessing.process.BaseProcess.start

    def start(self: Any) -> None:
        POLICY.started += 1
        if not POLICY.processes:
            POLICY.note(f"started a process ({type(self).__name__} {self.name!r})")
        process_start(self)

    multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign]

    popen_init = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        if not is_tool_query(args):
            POLICY.started += 1
        if not POLICY.processes and not is_tool_query(args):
            POLICY.note(f"ran a subprocess ({_describe(args)})")
        popen_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]
    return POLICY


def install_in_child() -> None:
    """In an interpreter a test spawned (via ``sitecustomize``): log compile
    calls to ``$DLRM_FUZZ_TIERGUARD_LOG`` for the pytest process to judge."""
    global _CHILD_LOG, _installed
    log = os.environ.get(LOG_ENV)
    if not log or _installed:
        return
    _installed = True
    _CHILD_LOG = log
    _watch_compiles()
