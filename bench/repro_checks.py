"""Seconds per repro check, warm (forked from the worker's warm server,
``fuzz.reports.repro.warm``) against fresh (``python -I repro.py``), on the
repros of a kept corpus: what the warm server saves each report job.

For each bucket folder with a ``repro.py``: one warm check (the first starts
the server: its start-up is printed apart), one fresh check, their exit
statuses (must agree: the server is a faster road to the same answer) and
the medians. Figures, not pass/fail; run it alone (a campaign beside it is
the loaded case, and doubles both columns). Exit 1 only when a warm and a
fresh check disagree.

Usage: python bench/repro_checks.py CORPUS_DIR [--limit N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="at most this many folders (0: all)")
    args = parser.parse_args()

    from fuzz.reports.repro import run_repro
    from fuzz.reports.repro.warm import COLD_ENV

    folders = sorted(p for p in args.corpus.iterdir() if (p / "repro.py").exists())
    if args.limit:
        folders = folders[:args.limit]
    if not folders:
        print(f"{args.corpus}: no folder holds a repro.py; pass a kept campaign's corpus")
        return 2
    began = time.monotonic()
    run_repro(folders[0], 600)  # starts this process's warm server
    print(f"warm server start + first check: {time.monotonic() - began:.1f} s")
    warm_s, fresh_s, disagree = [], [], 0
    for folder in folders:
        began = time.monotonic()
        warm_code, _ = run_repro(folder, 600)
        warm_s.append(time.monotonic() - began)
        os.environ[COLD_ENV] = "1"
        began = time.monotonic()
        fresh_code, _ = run_repro(folder, 600)
        fresh_s.append(time.monotonic() - began)
        del os.environ[COLD_ENV]
        disagree += warm_code != fresh_code
        print(f"{folder.name:44s} warm {warm_s[-1]:5.1f} s exit {warm_code:4d} | "
              f"fresh {fresh_s[-1]:5.1f} s exit {fresh_code:4d}")
    print(f"{len(folders)} repros: median warm {statistics.median(warm_s):.1f} s, fresh "
          f"{statistics.median(fresh_s):.1f} s; total warm {sum(warm_s):.0f} s, fresh {sum(fresh_s):.0f} s; "
          f"{disagree} disagree")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
