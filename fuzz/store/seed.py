"""The user's corpus and the committed one: a campaign reads the project's
regression suite but writes only to the user's own folder.

The committed ``corpus/`` is the project's regression suite, tracked by git;
a newcomer's first campaign must not rewrite it (a smaller case of a known
bucket used to replace the committed one, with its repro and REPORT.md). So
``dlrm-fuzz run`` without ``--corpus`` stores into the user's corpus, outside
any checkout (:func:`default_corpus_dir`), and *seeds* it from the committed
one (``--seed-corpus``, default ``corpus/``; with an explicit ``--corpus``
only when ``--seed-corpus`` is given, so a named folder is what it was
before): every stored case the user's corpus lacks is copied in before the
campaign starts, so the campaign
replays them, knows their buckets, and any smaller case or report it writes
lands in the copy. The campaign itself keeps one corpus folder
(``fuzz.engine.campaign`` is unchanged); writing into the committed corpus is asking
for it by name: ``--corpus corpus/``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from fuzz.store.corpus import CorpusError

__all__ = ["default_corpus_dir", "seed_corpus"]


def default_corpus_dir() -> Path:
    """``$DLRM_FUZZ_CORPUS``, else ``$XDG_DATA_HOME/dlrm-fuzz/corpus``
    (``~/.local/share/dlrm-fuzz/corpus``): findings are data the user keeps,
    not a cache that may be cleared, and not a tracked folder."""
    chosen = os.environ.get("DLRM_FUZZ_CORPUS")
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dlrm-fuzz" / "corpus"


def seed_corpus(seed: Path | None, corpus: Path) -> int:
    """Copy every case folder of ``seed`` that ``corpus`` lacks into it; the
    number copied. The seed is only read. Nothing to do without a seed folder,
    or when both name the same folder (the user asked to write into it)."""
    if seed is None or not seed.is_dir():
        return 0
    if corpus.exists() and not corpus.is_dir():
        raise CorpusError(f"corpus={str(corpus)!r}: is not a folder; give a folder for the "
                          "campaign's findings")
    if corpus.exists() and corpus.resolve() == seed.resolve():
        return 0
    corpus.mkdir(parents=True, exist_ok=True)
    copied = 0
    for case in sorted(seed.iterdir()):
        if not (case / "case.json").is_file() or (corpus / case.name).exists():
            continue
        # Copied aside and renamed: a stopped seeding never leaves half a case.
        staging = Path(tempfile.mkdtemp(prefix=f".{case.name}-", dir=corpus))
        try:
            shutil.copytree(case, staging / case.name)
            (staging / case.name).rename(corpus / case.name)
            copied += 1
        except OSError:
            if not (corpus / case.name).exists():
                raise
            # else a concurrent campaign seeded it first
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return copied
