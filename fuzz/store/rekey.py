"""Bring a corpus stored under an older bucket-key recipe to today's ids.

A bucket id is a hash of its key (``oracles.signature``), and the key's
recipe is versioned (``KEY_VERSION``). When the recipe changes, a stored
bucket's id would no longer be the one a fresh run files the same fault in,
and replay would call every such case MOVED although nothing in the
toolchain moved. ``rekey`` recomputes each stored key with
``upgrade_key``, renames the folder to the new id and rewrites the id where
the entry names itself (``case.json``, ``REPORT.md``). It never overwrites:
two stored cases that now share one id are both kept, the second under its
old id, and named in the answer so a person can choose between them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fuzz.store import corpus
from oracles.signature import KEY_VERSION, bucket_for, upgrade_key

__all__ = ["Rekeyed", "rekey"]

# Files of an entry that spell out its own bucket id.
_NAMING_FILES = ("REPORT.md",)


@dataclass(frozen=True)
class Rekeyed:
    """What ``rekey`` did to one stored bucket."""

    old: str
    new: str
    status: str  # "renamed", "current" (already today's id), "kept: <why>"


def rekey(root: Path) -> list[Rekeyed]:
    """Every entry of ``root`` under today's bucket id; junk is left alone
    (``corpus.load`` names it)."""
    entries, _ = corpus.load(root)
    taken = {entry.bucket for entry in entries}
    done = []
    for entry in entries:
        key = upgrade_key(entry.signature)
        new = bucket_for(entry.verdict, key)
        if new == entry.bucket:
            if entry.key_version != KEY_VERSION:
                corpus.update_case(root, entry.bucket, key_version=KEY_VERSION)
            done.append(Rekeyed(entry.bucket, new, "current"))
            continue
        if new in taken:
            done.append(Rekeyed(entry.bucket, new, f"kept: {new} is stored already"))
            continue
        _rename(root, entry.bucket, new, key)
        taken.add(new)
        done.append(Rekeyed(entry.bucket, new, "renamed"))
    return done


def _rename(root: Path, old: str, new: str, key: str) -> None:
    """The case file first (under its old folder), then the folder: a stop in
    between leaves a loadable entry whose case already names its new id."""
    folder = root / old
    corpus.update_case(root, old, bucket=new, signature=key, key_version=KEY_VERSION)
    for name in _NAMING_FILES:
        path = folder / name
        if path.is_file():
            temp = folder / f".{name}.{os.getpid()}"
            temp.write_text(path.read_text().replace(old, new))
            os.replace(temp, path)
    os.rename(folder, root / new)

