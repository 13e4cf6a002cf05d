"""An on-disk cache of what the deterministic stages produce, so that replays
and shrinking never export, lower or compile an identical program twice.

Two kinds of entries share one folder: *programs* (the MLIR a config, seed and
input shapes lower to, for one torch-mlir output type) and *artifacts* (the
vmfb IREE compiles from an MLIR text for one backend and flag set). Keys hash
everything that determines the result, tool versions included, so upgrading
the toolchain never serves a stale artifact. A stage *failure* is cached too:
it is as deterministic as a success and as expensive to reproduce.

Safe with concurrent workers: an entry is written to a temporary file and
renamed into place, so readers see all of it or nothing. Every entry carries a
SHA-256 of its payload; a truncated or corrupt file is deleted and treated as
a miss, never returned. The folder is bounded: a ledger file holds the total
size of the entries, updated under a file lock on every write, so a write
costs no directory scan; only when the total passes the bound is the folder
scanned and the least recently used entries evicted down to 90% of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from oracles.results import Failure

__all__ = ["ArtifactCache", "cache_key", "default_cache_dir"]

_MAGIC = b"DLRMFZ1\n"
_DIGEST = 32
_HEADER = len(_MAGIC) + _DIGEST
_LEDGER = ".size"
_LOCK = ".lock"


def default_cache_dir() -> Path:
    """Where compiled programs persist between runs: $DLRM_FUZZ_CACHE, else the XDG cache."""
    base = os.environ.get("DLRM_FUZZ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dlrm-fuzz")
    return Path(base)


# What a cached value means changes with dlrm-fuzz itself, not only with the
# toolchain: bump this when a stored Failure or program would read differently
# (2: a failure in torch-mlir's shared prefix carries ``Failure.owner``; a
# cache written before would file it under the output type's bucket again).
CACHE_FORMAT = 2


def cache_key(*parts: Any) -> str:
    """A hex key over JSON-able parts (strings, numbers, lists, dicts) and
    ``CACHE_FORMAT``."""
    blob = json.dumps((CACHE_FORMAT, *parts), sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ArtifactCache:
    """On-disk, size-bounded LRU store of lowered programs, vmfbs and stage failures."""
    def __init__(self, root: Path, max_bytes: int = 2 * 1024**3) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.bin"

    # -- raw bytes ---------------------------------------------------------
    def get_bytes(self, key: str) -> bytes | None:
        """The payload under ``key``, or None when absent or corrupt (then deleted)."""
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        payload = data[_HEADER:]
        if not data.startswith(_MAGIC) or hashlib.sha256(payload).digest() != \
                data[len(_MAGIC):_HEADER]:
            self._remove(path)  # corrupt: a miss, and gone
            self.misses += 1
            return None
        try:
            os.utime(path)  # recency for LRU eviction
        except OSError:
            pass
        self.hits += 1
        return payload

    def put_bytes(self, key: str, payload: bytes) -> None:
        """Store a checksummed payload atomically; write errors are ignored."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
            with self._locked():
                replaced = _size(path)
                os.replace(temp, path)
                self._account(_HEADER + len(payload) - replaced)
        except OSError:
            return  # a cache that cannot write is only a slower cache

    def _remove(self, path: Path) -> None:
        try:
            with self._locked():
                size = _size(path)
                path.unlink(missing_ok=True)
                self._account(-size)
        except OSError:
            pass

    # -- bounds ------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time updates entries and the ledger together."""
        with open(self.root / _LOCK, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _account(self, delta: int) -> None:
        """Add ``delta`` bytes to the ledger (the lock is held); evict when over."""
        ledger = self.root / _LEDGER
        try:
            total = int(ledger.read_text()) + delta
        except (OSError, ValueError):  # no ledger yet, or a torn one: count afresh
            total = self.size_bytes()
        if total > self.max_bytes:
            total = self._evict()
        temp = ledger.with_name(f"{_LEDGER}.{os.getpid()}")
        temp.write_text(str(total))
        os.replace(temp, ledger)

    def _entries(self) -> Sequence[tuple[float, int, Path]]:
        found = []
        for path in self.root.glob("*/*.bin"):
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((stat.st_mtime, stat.st_size, path))
        return found

    def size_bytes(self) -> int:
        """Bytes on disk, counted file by file (rebuilds the ledger when missing or torn)."""
        return sum(size for _, size, _ in self._entries())

    def _evict(self) -> int:
        """Drop least recently used entries down to 90% of the bound; the new total."""
        entries = self._entries()
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes * 0.9:
                break
            path.unlink(missing_ok=True)
            total -= size
        return total

    # -- typed entries -----------------------------------------------------
    def get(self, key: str) -> str | bytes | Failure | None:
        """A cached program text, binary, or stage failure (raised again by callers)."""
        payload = self.get_bytes(key)
        if payload is None:
            return None
        tag, body = payload[:1], payload[1:]
        if tag == b"T":
            return body.decode()
        if tag == b"B":
            return body
        if tag == b"F":
            return Failure.from_dict(json.loads(body))
        return None

    def put(self, key: str, value: str | bytes | Failure) -> None:
        """Cache a program text, binary or stage failure, tagged so ``get`` returns its type."""
        if isinstance(value, Failure):
            payload = b"F" + json.dumps(value.to_dict()).encode()
        elif isinstance(value, str):
            payload = b"T" + value.encode()
        else:
            payload = b"B" + value
        self.put_bytes(key, payload)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
