"""Choosing and writing a form: the one-op form first where the verdict has
one (export error, lowering failure naming a torch op, IREE compile
failure, wrong answer localized to an op; on the other roads, any error),
kept only when it reproduces, else the model form (the road form on the
other roads); each written atomically and, with ``check``, run to record its
status."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from fuzz.reports.repro.core import (
    Repro,
    _remove,
    _status,
    _ToolchainFailed,
    _write_atomic,
    repro_target,
    run_repro,
)
from fuzz.reports.repro.backend_error import _backend_error_files
from fuzz.reports.repro.export_error import _export_error_files
from fuzz.reports.repro.lowering import _lowering_error_files
from fuzz.reports.repro.model import _model_files
from fuzz.reports.repro.road import _road_files, road_of, road_target
from fuzz.reports.repro.road_op import _road_op_files, has_road_op_form
from fuzz.reports.repro.script import RUNTIME_FILE, _refbackend_runtime
from fuzz.reports.repro.single_op import _single_op_files
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import TARGETS, CompiledTarget, IreeTarget, Target
from oracles.verdict import Verdict

__all__ = ["SINGLE_OP_FORMS", "has_single_op_form", "write_repro"]


# Repro forms that hold one op: a bucket reproducing in one is minimal.
SINGLE_OP_FORMS = ("single-op", "export", "lowering", "backend", "road-op")


# torch-mlir lowering failures: the error names the torch op it could not lower.
_LOWERING_VERDICTS = (Verdict.LOWERING_UNSUPPORTED_OP, Verdict.LOWERING_INVALID_IR,
                      Verdict.LOWERING_ERROR)


def has_single_op_form(entry: CorpusEntry) -> bool:
    """Whether ``write_repro`` tries a one-op form first: an export failure
    (the op whose own torch.export fails), a lowering failure naming the
    torch op torch-mlir could not lower, or a wrong answer localized to an op;
    on the other roads, an error (the op that fails the road alone so)."""
    if road_target(entry) is not None:
        return has_road_op_form(entry)
    return entry.verdict is Verdict.EXPORT_ERROR or _lowers_one_op(entry) or \
        _compiles_one_op(entry) or \
        (entry.verdict is Verdict.MISMATCH and (entry.culprit or "").startswith("op:"))


def _compiles_one_op(entry: CorpusEntry, table: dict[str, Target] | None = None) -> bool:
    """An IREE compile failure of the FX road: one op of the model may fail
    ``iree-compile`` the same way (``backend_error``)."""
    own = (TARGETS if table is None else table).get(entry.target)
    return entry.verdict is Verdict.COMPILE_ERROR and isinstance(own, IreeTarget) and \
        road_of(own) is None


def _lowers_one_op(entry: CorpusEntry) -> bool:
    """A lowering failure blamed on a named torch op (``torch.aten.gather``,
    ``torch.quantized.*``): that op alone may fail the same way."""
    return entry.verdict in _LOWERING_VERDICTS and (entry.op or "").startswith("torch.") \
        and entry.op != "torch.operator"


# The one-op forms found by searching the model's ops (each op kind compiled
# alone): the costly ones, 7-30 s a report on lavapipe.
SEARCHED_FORMS = ("backend", "road-op")
# Files of the stored case that a repro form also reads (the model form's
# inputs): never overwritten by a report, whose case may be stale by the time
# it writes (a smaller case replaced it while the job ran; seed 97's campaign
# then loaded the new config with the old batches and stopped).
_CASE_FILES = frozenset({"inputs.npz"})


def write_repro(folder: Path, entry: CorpusEntry, table: dict[str, Target] | None = None,
                check: bool = True, timeout_s: float = 600, one_op_only: bool = False,
                searched: bool = False) -> Repro:
    """Write ``folder/repro.py`` (and what it loads) and, with ``check``, run it:
    the single-op form when the culprit op is known and it reproduces, else
    the model form, whose status says whether it reproduces; on the other
    roads, for an error the one-op road form when an op fails the road alone
    so and its script reproduces, else the road form.

    ``one_op_only``: stop after the one-op form even when it does not
    reproduce (the campaign's first report of an op-level bucket: one that
    does not reproduce as one op is shrunk and reported again, so a model
    form written now would be thrown away).

    ``searched``: this bucket's first report searched its model for one op
    that fails alone (``SEARCHED_FORMS``) and found none; its report after
    shrinking does not search again (in three seed-97 campaigns no search
    that failed on the found case succeeded on the shrunk one, and each
    cost 7-11 s alone, twice that beside a campaign) and says so."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder={str(folder)!r}: not a folder; pass the entry's corpus folder")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s}: must be > 0")
    road = road_target(entry, table)
    searched = searched and not one_op_only  # a first report always searches
    before = "; searched on the case before shrinking" if searched else ""
    if road is not None:  # the other roads into IREE: their own packages only
        road_op = has_road_op_form(entry, table)
        return _one_op_first(folder, entry, road, "road-op" if road_op and not searched else None,
                             "road", check, timeout_s, one_op_only,
                             tried=f" (road-op form: no single op of the model fails the road so{before})"
                             if road_op and searched else "",
                             alone="no single op of the model fails the road so")
    target = repro_target(entry, table)
    tried = ""
    if entry.verdict is Verdict.EXPORT_ERROR:
        export = _attempt(folder, entry, target, "export", check, timeout_s)
        if export is not None:
            return export
        tried = " (no single op of the model fails torch.export the same way)"
    one_op = "single-op" if entry.verdict is Verdict.MISMATCH and has_single_op_form(entry) \
        else "lowering" if _lowers_one_op(entry) \
        else "backend" if _compiles_one_op(entry, table) else None
    if one_op == "backend" and searched:
        one_op, tried = None, f"{tried} (backend form: no op of the model alone fails so{before})"
    alone = "no op of the model alone fails so" if one_op == "backend" \
        else f"no {entry.culprit or entry.op} alone fails so"
    return _one_op_first(folder, entry, target, one_op, "model", check, timeout_s, one_op_only, tried,
                         alone=alone)


def _one_op_first(folder: Path, entry: CorpusEntry, target: Target, one_op: str | None, whole: str,
                  check: bool, timeout_s: float, one_op_only: bool, tried: str, alone: str) -> Repro:
    """The ``one_op`` form when it reproduces (or, ``one_op_only``, whatever
    it gives), else the ``whole`` form (model or road), whose status also
    says what was ``tried`` (``alone``: why no one op was written)."""
    if one_op is not None:
        single = _attempt(folder, entry, target, one_op, check, timeout_s)
        if single is not None and (not check or single.status == "reproduces" or one_op_only):
            return single  # one op only: left as written, with its status, until the next report
        if one_op_only:
            return Repro(one_op, target.name, 0, f"does not reproduce: {alone}", None, "")
        for written in ("arg*.npy", "const*.npy", "model.onnx", "commands.sh"):
            _remove(folder, written)  # the one op's: the whole form writes its own
        tried = f" ({one_op} form: {single.status if single else alone})"
    elif one_op_only and tried:
        return Repro("export", target.name, 0, "does not reproduce: " + tried.strip(" ()"),
                     None, "")
    whole_form = _attempt(folder, entry, target, whole, check, timeout_s)
    assert whole_form is not None
    if tried and whole_form.status != "reproduces":
        return dataclasses.replace(whole_form, status=whole_form.status + tried)
    return whole_form


def _attempt(folder: Path, entry: CorpusEntry, target: Target, kind: str, check: bool,
             timeout_s: float) -> Repro | None:
    forms: dict[str, Callable[[CorpusEntry, Any], dict[str, str | bytes] | None]] = {
        "single-op": _single_op_files, "export": _export_error_files,
        "lowering": _lowering_error_files, "backend": _backend_error_files,
        "model": _model_files, "road": _road_files, "road-op": _road_op_files}
    try:
        files = forms[kind](entry, target)
    except _ToolchainFailed as failed:
        return Repro(kind, target.name, 0, f"cannot run: {failed}", None, "")
    if files is None:
        return None
    if RUNTIME_FILE in str(files["repro.py"]):
        files[RUNTIME_FILE] = _refbackend_runtime()
    for name, data in files.items():
        if name in _CASE_FILES and (folder / name).exists():
            continue  # the case's own: the same bytes, unless this job's case is stale
        _write_atomic(folder / name, data)
    lines = len(str(files["repro.py"]).splitlines())
    if not check:
        return Repro(kind, target.name, lines, "not checked", None, "")
    code, output = run_repro(folder, timeout_s)
    return Repro(kind, target.name, lines, _status(entry, code, output), code, output)
