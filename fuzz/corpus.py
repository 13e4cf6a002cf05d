"""The corpus: one self-describing folder per failure bucket.

``corpus/<bucket>/`` holds ``case.json`` (config, seed, verdict, error line,
numbers, tool versions), ``inputs.npz`` (the batches; no pickles),
``error.txt`` (the toolchain's full message) and the intermediate programs.
A folder is written under a temporary name and renamed into place, so a
reader never sees half an entry, and an existing bucket is never overwritten:
the first sample to hit a bug keeps its place. Loading skips and names junk
(a folder with a corrupt ``case.json``, missing files) instead of dying.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fuzz.config import DLRMConfig, InvalidConfig
from fuzz.sample import InvalidSample, Sample
from fuzz.versions import tool_versions

__all__ = ["CorpusEntry", "CorpusError", "save", "load", "SCHEMA"]

SCHEMA = 1


class CorpusError(ValueError):
    """A corpus folder that cannot be used (not a directory, not writable)."""


@dataclass(frozen=True)
class CorpusEntry:
    path: Path
    case: dict[str, Any]
    sample: Sample

    @property
    def bucket(self) -> str:
        return str(self.case["bucket"])


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


def save(root: Path, bucket: str, case: dict[str, Any], sample: Sample,
         texts: dict[str, str] | None = None, detail: str = "") -> Path | None:
    """Store a new bucket atomically; returns its folder, or None when the
    bucket is already in the corpus (nothing is overwritten)."""
    _ensure_dir(root)
    final = root / bucket
    if final.exists():
        return None
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{bucket}-", dir=root))
    try:
        record = {"schema": SCHEMA, "bucket": bucket, "config": sample.config.to_dict(),
                  "seed": sample.seed, "batches": len(sample.batches),
                  "tool_versions": tool_versions(), "created": time.strftime(
                      "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **case}
        (staging / "case.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        (staging / "inputs.npz").write_bytes(sample.npz_bytes())
        if detail:
            (staging / "error.txt").write_text(detail)
        for name, text in (texts or {}).items():
            (staging / Path(name).name).write_text(text)
        os.rename(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if final.exists():  # another writer won the race: same bucket, keep theirs
            return None
        raise
    return final


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
            entries.append(_load_entry(folder))
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
            junk.append(f"{folder}: skipped, {exc}")
    return entries, junk


def _load_entry(folder: Path) -> CorpusEntry:
    try:
        case = json.loads((folder / "case.json").read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"case.json is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(case, dict) or case.get("schema") != SCHEMA:
        raise ValueError(f"case.json schema={case.get('schema') if isinstance(case, dict) else None!r}"
                         f": expected {SCHEMA}")
    try:
        config = DLRMConfig.from_dict(case["config"])
        with np.load(folder / "inputs.npz", allow_pickle=False) as arrays:
            sample = Sample.from_arrays(config, int(case["seed"]), arrays)
    except (InvalidConfig, InvalidSample) as exc:
        raise ValueError(str(exc)) from exc
    return CorpusEntry(folder, case, sample)
