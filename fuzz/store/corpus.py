"""The corpus: one self-describing folder per failure bucket.

``corpus/<bucket>/`` holds ``case.json`` (the typed ``CorpusEntry``: config,
seed, verdict, owner, culprit, error line, numbers, the targets it was seen
on, the shrink record, tool versions), ``inputs.npz`` (the batches; no
pickles), ``error.txt`` (the toolchain's full message) and the intermediate
programs. ``CorpusEntry.to_case`` / ``CorpusEntry.from_case`` mirror each
other, so what is saved is exactly what loads.

Writes never leave half an entry: a new folder is written under a temporary
name and renamed into place; a smaller case for a known bucket is swapped in
with one atomic exchange of the two folders; the list of targets a bucket was
seen on is rewritten through a temporary file under a lock, so two campaigns
sharing a corpus never lose each other's updates. A larger case never
replaces a smaller one. Loading skips and names junk (a corrupt
``case.json``, missing files) instead of dying.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import json
import os
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from fuzz.model.config import DLRMConfig, InvalidConfig
from fuzz.model.sample import InvalidSample, Sample
from fuzz.targets.versions import recorded_versions
from oracles.results import Stage
from oracles.signature import KEY_VERSION
from oracles.verdict import Verdict

__all__ = ["CorpusEntry", "CorpusError", "save", "load", "load_entry", "record_seen",
           "update_case", "replace_if_smaller", "hold", "promote", "HELD", "SCHEMA"]

# The holding area inside a corpus folder: wrong answers that vanished when
# their intermediates were exposed wait there until their model repro
# reproduces (``fuzz.engine.ledger``). ``load`` skips it like every dot folder,
# so a held case is never replayed, bumped or bisected as a bug.
HELD = ".held"

SCHEMA = 2
_READABLE_SCHEMAS = (1, 2)
_LOCK = ".lock"


class CorpusError(ValueError):
    """A corpus folder that cannot be used (not a directory, not writable)."""


@dataclass(frozen=True)
class CorpusEntry:
    """A stored failure: the smallest sample known for a bucket, and everything
    a triager, a replay or a reproducer needs to know about it."""

    bucket: str
    signature: str  # the readable key the bucket id hashes (oracles.signature)
    verdict: Verdict
    owner: str  # the component blamed (oracles.blame)
    target: str  # the target the stored sample fails on (replay and shrink use it)
    sample: Sample = field(compare=False)
    stage: Stage = Stage.RUN
    error: str = ""
    op: str | None = None
    culprit: str | None = None  # MISMATCH: localized op or minimal feature set
    localization: dict[str, Any] = field(default_factory=dict)
    numbers: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    seen_on: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    # Found on a repaired variant (fuzz.triage.repair): the features the scheduler
    # switched off in the drawn sample; the stored sample is the variant.
    repairs: tuple[str, ...] = ()
    campaign_seed: int | None = None
    shrink: dict[str, Any] | None = None
    # Written with the reproducer (fuzz.reports.bugreport): "reproduces" or why not,
    # what repro.py is (kind, target, lines), the command-line tool files.
    # The regression-suite state (fuzz.regress.replay): "fail" (a known bug) or "pass"
    # (recorded as fixed, with the versions that fixed it); where it moved.
    expect: str = "fail"
    fixed_in: dict[str, str] | None = None
    moved_to: tuple[str, ...] = ()
    repro_status: str | None = None
    repro: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)
    # Release versions plus what tells a local build apart (fuzz.targets.versions).
    tool_versions: dict[str, str] = field(default_factory=recorded_versions)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime()))
    key_version: int = KEY_VERSION
    # Files beside case.json, not inside it.
    detail: str = field(default="", compare=False, repr=False)
    texts: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    path: Path | None = field(default=None, compare=False)

    # -- mirrored JSON -----------------------------------------------------
    def to_case(self) -> dict[str, Any]:
        """``case.json``: every field but the sample's arrays, the files and the path."""
        return {
            "schema": SCHEMA, "bucket": self.bucket, "signature": self.signature,
            "key_version": self.key_version, "verdict": self.verdict.value,
            "owner": self.owner, "target": self.target, "stage": Stage.parse(str(self.stage)).value,
            "error": self.error, "op": self.op, "culprit": self.culprit,
            "localization": self.localization, "numbers": self.numbers,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "seen_on": sorted(self.seen_on), "shape_modes": list(self.shape_modes),
            "features": list(self.features), "repairs": list(self.repairs),
            "campaign_seed": self.campaign_seed, "shrink": self.shrink,
            "repro_status": self.repro_status, "repro": self.repro, "tools": self.tools,
            "expect": self.expect, "fixed_in": self.fixed_in, "moved_to": list(self.moved_to),
            "tool_versions": self.tool_versions, "created": self.created,
            "config": self.sample.config.to_dict(), "seed": self.sample.seed,
            "batches": len(self.sample.batches),
        }

    @classmethod
    def from_case(cls, case: dict[str, Any], sample: Sample, path: Path | None = None,
                  detail: str = "") -> "CorpusEntry":
        """The inverse of ``to_case`` (schema 1 entries, from before blame and
        shrinking, load with what they have)."""
        return cls(
            bucket=str(case["bucket"]), signature=str(case.get("signature", "")),
            verdict=Verdict(case["verdict"]), owner=str(case.get("owner", "?")),
            target=str(case["target"]), sample=sample,
            stage=Stage.parse(str(case.get("stage", "run"))), error=str(case.get("error", "")),
            op=case.get("op"), culprit=case.get("culprit"),
            localization=dict(case.get("localization") or {}),
            numbers=dict(case.get("numbers") or {}), timings=dict(case.get("timings") or {}),
            seen_on=tuple(case.get("seen_on") or (case["target"],)),
            features=tuple(case.get("features") or ()),
            repairs=tuple(str(r) for r in case.get("repairs") or ()),
            campaign_seed=case.get("campaign_seed"),
            shrink=case.get("shrink"), repro_status=case.get("repro_status"),
            expect=str(case.get("expect") or "fail"), fixed_in=case.get("fixed_in"),
            moved_to=tuple(case.get("moved_to") or ()),
            repro=dict(case.get("repro") or {}), tools=dict(case.get("tools") or {}),
            tool_versions=dict(case.get("tool_versions") or {}),
            created=str(case.get("created", "")), key_version=int(case.get("key_version", 1)),
            detail=detail, path=path)

    @property
    def shape_modes(self) -> tuple[str, ...]:
        """``static`` / ``dynamic``: the shape modes among the targets it was seen on."""
        return _shape_modes(self.seen_on)

    def with_seen(self, targets: Any) -> "CorpusEntry":
        """The entry with ``targets`` added to the targets it was seen failing on."""
        return dataclasses.replace(self, seen_on=tuple(sorted(set(self.seen_on) | set(targets))))


def _shape_modes(targets: Any) -> tuple[str, ...]:
    # Every compiled target's dynamic-shape form is named "<name>-dyn" (fuzz.targets.catalog).
    return tuple(sorted({"dynamic" if str(name).endswith("-dyn") else "static"
                         for name in targets}))


def _refuse_non_folder(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise CorpusError(f"corpus={str(root)!r}: exists but is not a folder; "
                          f"pass --corpus a folder path")


def _ensure_dir(root: Path) -> None:
    _refuse_non_folder(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CorpusError(f"corpus={str(root)!r}: cannot create it ({exc.strerror}); "
                          f"pass --corpus a writable folder") from exc


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One writer at a time per corpus (across processes), for read-modify-write."""
    with open(root / _LOCK, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_folder(root: Path, entry: CorpusEntry) -> Path:
    """The entry's files in a fresh hidden staging folder (loaders skip it)."""
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.bucket}-", dir=root))
    try:
        (staging / "case.json").write_text(json.dumps(entry.to_case(), indent=2,
                                                      sort_keys=True) + "\n")
        (staging / "inputs.npz").write_bytes(entry.sample.npz_bytes())
        if entry.detail:
            (staging / "error.txt").write_text(entry.detail)
        for name, text in entry.texts.items():
            (staging / Path(name).name).write_text(text)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def save(root: Path, entry: CorpusEntry) -> Path | None:
    """Store a new bucket atomically; returns its folder, or None when the
    bucket is already in the corpus (nothing is overwritten)."""
    _ensure_dir(root)
    final = root / entry.bucket
    if final.exists():
        return None
    staging = _write_folder(root, entry)
    try:
        os.rename(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if final.exists():  # another writer won the race: same bucket, keep theirs
            return None
        raise
    return final


def hold(root: Path, entry: CorpusEntry) -> Path | None:
    """Store a case in ``root``'s holding area (``HELD``); a case held there
    before for the same bucket (an earlier campaign's, not confirmed) is
    replaced: the holding area keeps no history. None when not stored."""
    held = root / HELD
    _ensure_dir(held)
    shutil.rmtree(held / entry.bucket, ignore_errors=True)
    return save(held, entry)


def promote(root: Path, bucket: str) -> Path | None:
    """Move a held case into the corpus (one rename, under the corpus lock);
    None when the corpus has that bucket already (the stored case is kept and
    the held one stays where it is)."""
    final = root / bucket
    with _locked(root):
        if final.exists():
            return None
        os.rename(root / HELD / bucket, final)
    return final


def _rewrite_case(root: Path, bucket: str,
                  change: Callable[[dict[str, Any]], bool]) -> bool:
    """Read-modify-write of one ``case.json``: serialized by the corpus lock,
    written through a temporary file and a rename. ``change`` edits the case
    in place and says whether anything changed; a missing or junk case is
    left alone (False)."""
    folder = root / bucket
    with _locked(root):
        try:
            case = json.loads((folder / "case.json").read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(case, dict) or not change(case):
            return False
        temp = folder / f".case.json.{os.getpid()}"
        temp.write_text(json.dumps(case, indent=2, sort_keys=True) + "\n")
        os.replace(temp, folder / "case.json")
        return True


def record_seen(root: Path, bucket: str, targets: Any) -> bool:
    """Add ``targets`` to a stored bucket's ``seen_on``; True when it grew."""
    def grow(case: dict[str, Any]) -> bool:
        seen = set(case.get("seen_on") or [case.get("target")])
        grown = seen | set(targets)
        case["seen_on"] = sorted(str(t) for t in grown if t)
        case["shape_modes"] = list(_shape_modes(case["seen_on"]))
        return grown != seen

    return _rewrite_case(root, bucket, grow)


def update_case(root: Path, bucket: str, /, **fields: Any) -> bool:
    """Set top-level fields of a stored case (e.g. ``repro_status``, or its
    own ``bucket`` when it is renamed) atomically."""
    def apply(case: dict[str, Any]) -> bool:
        case.update(fields)
        return True

    return _rewrite_case(root, bucket, apply)


def replace_if_smaller(root: Path, entry: CorpusEntry,
                       size_key: Callable[[Sample], tuple[int, ...]]) -> bool:
    """Swap ``entry`` in for the stored case of its bucket when its sample is
    strictly smaller by ``size_key``; the stored ``seen_on`` is kept (merged).
    A larger or equal case never replaces; a missing bucket is saved."""
    _ensure_dir(root)
    final = root / entry.bucket
    with _locked(root):
        if not final.exists():
            return save(root, entry) is not None
        try:
            stored = load_entry(final)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile):
            return False  # junk is reported by load(), never overwritten
        if size_key(entry.sample) >= size_key(stored.sample):
            return False
        staging = _write_folder(root, entry.with_seen(stored.seen_on))
        _exchange(staging, final)
        shutil.rmtree(staging, ignore_errors=True)  # now holds the old case
        return True


def _exchange(a: Path, b: Path) -> None:
    """Swap two folders in one step (Linux ``renameat2(RENAME_EXCHANGE)``), so a
    reader sees the old case or the new one, never neither; elsewhere two renames."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        at_fdcwd, rename_exchange = -100, 2
        if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
            return
    aside = b.with_name(f".old-{b.name}-{os.getpid()}")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def load(root: Path) -> tuple[list[CorpusEntry], list[str]]:
    """All readable entries, and one line per junk folder saying what is wrong.
    A missing folder is an empty corpus; a file in its place is an error."""
    _refuse_non_folder(root)
    entries: list[CorpusEntry] = []
    junk: list[str] = []
    if not root.is_dir():
        return entries, junk
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        try:
            entries.append(load_entry(folder))
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
            junk.append(f"{folder}: skipped, {exc}")
    return entries, junk


def load_entry(folder: Path) -> CorpusEntry:
    """One bucket folder; raises ValueError (or OSError) naming what is wrong."""
    try:
        case = json.loads((folder / "case.json").read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"case.json is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(case, dict) or case.get("schema") not in _READABLE_SCHEMAS:
        raise ValueError(f"case.json schema={case.get('schema') if isinstance(case, dict) else None!r}"
                         f": expected one of {list(_READABLE_SCHEMAS)}")
    try:
        config = DLRMConfig.from_dict(case["config"])
        with np.load(folder / "inputs.npz", allow_pickle=False) as arrays:
            sample = Sample.from_arrays(config, int(case["seed"]), arrays)
    except (InvalidConfig, InvalidSample) as exc:
        raise ValueError(str(exc)) from exc
    detail_path = folder / "error.txt"
    detail = detail_path.read_text() if detail_path.exists() else ""
    return CorpusEntry.from_case(case, sample, folder, detail)
