"""What every repro form shares outside its script: the ``Repro`` record, the
target a repro runs on, running a written ``repro.py`` in a fresh interpreter
and reading its status, the fault's literal words (``fault_parts``) the
scripts look for, and atomic writes into the entry's folder."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import TARGETS, CompiledTarget, IreeTarget, RefBackendTarget, Target
from oracles.verdict import Verdict
from fuzz.targets.devices import ensure_runtime_environment
from fuzz.reports.repro.warm import run_warm

__all__ = ["ALLOWED_IMPORTS", "Repro", "repro_target", "run_repro", "hang_limit_s", "fault_parts"]


# What a repro may import: the toolchain under test, numpy, and the standard
# library modules the templates below use.
ALLOWED_IMPORTS = frozenset({"torch", "torch_mlir", "iree.compiler", "iree.runtime", "numpy",
                             "sys", "os", "re", "tempfile", "subprocess", "runpy",
                             # the refbackend runtime beside a refbackend repro
                             "__future__", "torch_mlir.execution_engine", "torch_mlir.ir",
                             "torch_mlir.passmanager", "torch_mlir._mlir_libs._torchMlir", "ctypes",
                             "functools", "threading", "dataclasses", "typing",
                             # the other roads' own packages (the road form)
                             "onnxruntime", "iree.turbine", "iree.compiler.tools.import_onnx.__main__"})


# IREE targets to reproduce a refbackend finding on, most familiar first.
_PREFERRED = ("iree-cpu", "iree-cpu-sync", "iree-vmvx")


_OUTPUT_CHARS = 4000


# Placeholders oracles.normalize puts in an error key, and the spot where it
# dropped an op dump (": name = "): the text between them is the fault's own.
_PLACEHOLDER = re.compile(r"\bN\b|%v|<src>|<file>|\[\.\.\.\]|tensor<\.\.\.>|0x\.\.\.|"
                          r"loc\(\.\.\.\)|: name = ")
# ONNX names the normalizer took the exporter's numbers off (val_39 -> val,
# node_GatherND_41 -> node_GatherND, n14_n0_3 -> n): each ends a part, the
# tool's text going on with the number.
_NUMBERED_NAME = re.compile(r"\b(val|node_[A-Za-z]+|n)\b")


@dataclass(frozen=True)
class Repro:
    """What was written and whether it reproduces (``status`` starts with
    "reproduces", "does not reproduce: " or "cannot run: ")."""

    kind: str  # "single-op" | "export" | "lowering" | "model" | "road" | "road-op"
    target: str
    lines: int
    status: str
    exit_code: int | None
    output: str

    def to_dict(self) -> dict[str, Any]:
        """The repro's outcome as JSON, stored with the case under ``repro``."""
        return dataclasses.asdict(self)


def repro_target(entry: CorpusEntry, table: dict[str, Target] | None = None) -> CompiledTarget:
    """The target the repro runs: the entry's own when it is an IREE target;
    torch-mlir's refbackend when the bug is refbackend's (blamed on it, or
    seen on no IREE target: an IREE repro would pass or fail another way);
    else the IREE target it was also seen on that lowers the same way (output
    type, shape mode), most familiar first; else any IREE target of that
    output type. A maintainer of IREE or torch-mlir runs IREE where it shows
    the bug."""
    table = TARGETS if table is None else table
    own = table.get(entry.target)
    if isinstance(own, IreeTarget):
        return own
    seen = [n for n in entry.seen_on if isinstance(table.get(n), IreeTarget)]
    if isinstance(own, RefBackendTarget) and (entry.owner.startswith(own.backend_owner) or not seen):
        return own
    output_type = own.output_type if isinstance(own, CompiledTarget) else "linalg-on-tensors"
    dynamic = bool(getattr(own, "dynamic", False)) or entry.target.endswith("-dyn")

    def rank(name: str) -> tuple[int, int, int, str]:
        target = table[name]
        assert isinstance(target, IreeTarget)
        base = name[:-4] if name.endswith("-dyn") else name
        familiar = _PREFERRED.index(base) if base in _PREFERRED else len(_PREFERRED)
        return (target.output_type != output_type, target.dynamic != dynamic, familiar, name)

    same = [n for n, t in table.items() if isinstance(t, IreeTarget) and t.output_type == output_type]
    if not seen and not same:
        raise ValueError(f"target={entry.target!r}: no IREE target in the table lowers "
                         f"{output_type!r}; pass a table with one (see fuzz.targets.catalog.TARGETS)")
    chosen = table[min(seen or same, key=rank)]
    assert isinstance(chosen, IreeTarget)
    return chosen


def run_repro(folder: Path, timeout_s: float = 600, python: str = sys.executable) -> tuple[int, str]:
    """Run ``python -I repro.py`` in ``folder``: isolated, so neither the folder
    nor PYTHONPATH can lend it dlrm-fuzz. Returns (exit code, output tail);
    124 when it ran past ``timeout_s``. With this interpreter, forked from
    its warm server (``fuzz.reports.repro.warm``: the toolchain's imports
    paid once per worker); another ``python`` runs fresh."""

    ensure_runtime_environment()  # Vulkan's loader wants XDG_RUNTIME_DIR
    ran = run_warm(Path(folder), timeout_s, dict(os.environ)) \
        if python == sys.executable else None  # this interpreter's: forked warm
    if ran is None:
        try:
            done = subprocess.run([python, "-I", "repro.py"], cwd=folder, capture_output=True,
                                  text=True, timeout=timeout_s, env=dict(os.environ))
            ran = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) \
                else exc.stdout
            ran = 124, out or ""
    code, output = ran
    if code == 124:
        output += f"\ntimed out after {timeout_s:.0f} s"
    return code, output[-_OUTPUT_CHARS:]


def _status(entry: CorpusEntry, code: int, output: str) -> str:
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    if code == 1 and f"signature: {entry.signature}" in output:
        return "reproduces"
    if code == 2:
        cannot = next((line for line in output.splitlines() if line.startswith("cannot run")), last)
        return f"cannot run: {cannot.removeprefix('cannot run: ')[:300]}"
    return f"does not reproduce: exit {code}: {last[:300]}"


def _write_atomic(path: Path, data: str | bytes) -> None:
    raw = data.encode() if isinstance(data, str) else data
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _remove(folder: Path, pattern: str) -> None:
    for path in folder.glob(pattern):
        path.unlink(missing_ok=True)


class _ToolchainFailed(Exception):
    """The toolchain could not give us the program to write out (export failed)."""


def hang_limit_s(entry: CorpusEntry) -> float | None:
    """The seconds a TIMEOUT entry's stage got before the fuzzer killed it
    (the worker pool's "no answer within Ns" message), else None."""
    if entry.verdict is not Verdict.TIMEOUT:
        return None
    found = re.search(r"no answer within ([0-9.]+)s", entry.error or "")
    return float(found.group(1)) if found else 120.0


def fault_parts(entry: CorpusEntry) -> list[str]:
    """The literal words of the entry's normalized first error line (from its
    signature), in order, with the placeholders the normalizer put in cut out:
    the fault is present when the toolchain's text contains them all in order."""
    what = entry.signature.split("|", 2)[-1]
    if entry.op and what.startswith(f"{entry.op}|"):
        what = what[len(entry.op) + 1:]
    crashed = _COMPILER_CRASH.fullmatch(what)
    if crashed:  # the key's words are ours; the tool's own text has these
        name, function, source, assertion = crashed.groups()
        code = f"Error code: -{signal.Signals[name].value}" if name in signal.Signals.__members__ \
            else None
        return [part for part in (code, "Stack dump:" if function else None, function, source,
                                  assertion) if part]
    what = _NUMBERED_NAME.sub(r"\1 N", what)
    return [part.strip() for part in _PLACEHOLDER.split(what) if part.strip()]


# oracles.classify.compiler_crash_line's form, read back into the words the
# compiler printed ("Error code: -8", the frame's function and source file).
_COMPILER_CRASH = re.compile(r"iree-compile crashed \((SIG\w+|[^)]*)\)"
                             r"(?: in ([\w:]+)(?: \(([\w.]+)\))?)?(?:: assertion `(.*)' failed)?")
