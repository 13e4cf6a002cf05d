"""Discovery benchmark: ``--schedule`` against ``--no-schedule`` (the default).

The question a scheduler must answer is not "how many samples per minute"
but "how many distinct bugs, and how many wrong answers, per budget". This
runs real campaigns (``dlrm-fuzz run``, every available target, a fresh
corpus and a cold artifact cache each) for every seed, once with the
scheduler and once with every sample to every target, one after the other on this
machine, and prints per run and over the seeds together:

- distinct buckets and wrong-answer (MISMATCH) buckets,
- the wrong-answer bucket ids (for comparing seeds by name),
- seconds to the first discovery of each bucket (median, and the last),
- samples checked (sent to at least one target) and samples sent to no target,
- actionable buckets: shrunk to a fixpoint with a repro that reproduces.

Figures, not pass/fail (exit 0 whenever every campaign ran). The README's
scheduler paragraph quotes them: the schedule lost here (2026-12-05), so
every sample to every target is the default and ``--schedule`` opts in.

Usage: python bench/discovery.py [--seeds 1,2,3] [--budget 10m]
       [--targets a,b] [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = {"schedule": ("--schedule",), "no-schedule": ("--no-schedule",)}


def campaign(seed: int, mode: str, budget: str, targets: str, folder: Path) -> dict[str, Any]:
    """One real campaign into ``folder`` (fresh corpus and cache); its
    summary JSON plus what the stored cases say."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = folder / "summary.json"
    command = [sys.executable, "-m", "fuzz", "run", "--budget", budget, "--seed", str(seed),
               "--corpus", str(folder / "corpus"), "--cache", str(folder / "cache"),
               "--summary-json", str(summary), *MODES[mode]]
    if targets:
        command += ["--targets", targets]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    (folder / "stdout.txt").write_text(done.stdout)
    (folder / "stderr.txt").write_text(done.stderr)
    if not summary.exists():
        raise SystemExit(f"seed {seed} {mode}: the campaign wrote no summary "
                         f"(exit {done.returncode}); see {folder}/stderr.txt")
    return _figures(json.loads(summary.read_text()), time.monotonic() - started,
                    done.returncode)


def _figures(summary: dict[str, Any], wall_s: float, exit_code: int) -> dict[str, Any]:
    buckets: list[str] = summary["new_buckets"]
    found = summary.get("first_found_s", {})
    times = sorted(float(found[b]) for b in buckets if b in found)
    return {"exit": exit_code, "wall_s": round(wall_s, 1),
            "buckets": len(buckets),
            "mismatch_buckets": sorted(b for b in buckets if b.startswith("mismatch-")),
            "first_found_median_s": round(statistics.median(times), 1) if times else None,
            "first_found_last_s": round(times[-1], 1) if times else None,
            "first_found_s": {b: found.get(b) for b in buckets},
            "samples": summary["samples"], "unscheduled": summary.get("unscheduled", 0),
            "checked": summary["samples"] - summary.get("unscheduled", 0),
            "repaired": summary.get("repaired", 0),
            "actionable": summary["actionable"]["ready"]}


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Markdown: one row per (seed, mode), then the seeds together per mode."""
    lines = ["| seed | schedule | buckets | wrong-answer buckets | actionable "
             "| samples checked / sent to no target | repaired parts "
             "| first discovery median / last (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for seed, runs in results.items():
        for mode, r in runs.items():
            lines.append(
                f"| {seed} | {mode} | {r['buckets']} | {len(r['mismatch_buckets'])}: "
                f"{', '.join(b.removeprefix('mismatch-') for b in r['mismatch_buckets']) or '-'} "
                f"| {r['actionable']}/{r['buckets']} | {r['checked']} / {r['unscheduled']} "
                f"| {r['repaired']} | {r['first_found_median_s']} / {r['first_found_last_s']} |")
    for mode in MODES:
        runs = [by_mode[mode] for by_mode in results.values() if mode in by_mode]
        distinct = {b for r in runs for b in r["first_found_s"]}
        wrong = {b for r in runs for b in r["mismatch_buckets"]}
        lines.append(
            f"| all | {mode} | {sum(r['buckets'] for r in runs)} ({len(distinct)} distinct) "
            f"| {sum(len(r['mismatch_buckets']) for r in runs)} ({len(wrong)} distinct) "
            f"| {sum(r['actionable'] for r in runs)}/{sum(r['buckets'] for r in runs)} "
            f"| {sum(r['checked'] for r in runs)} / {sum(r['unscheduled'] for r in runs)} "
            f"| {sum(r['repaired'] for r in runs)} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--targets", default="", help="default: every available target")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every run's corpus, summary and output here")
    args = parser.parse_args(argv)
    keep = args.keep or Path(tempfile.mkdtemp(prefix="dlrm-fuzz-discovery-"))
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        for mode in args.modes.split(","):
            r = campaign(seed, mode, args.budget, args.targets, keep / f"seed{seed}-{mode}")
            results.setdefault(str(seed), {})[mode] = r
            print(f"seed {seed} {mode}: {r['buckets']} buckets, "
                  f"{len(r['mismatch_buckets'])} wrong-answer, {r['actionable']} actionable, "
                  f"{r['checked']} samples checked, {r['unscheduled']} sent to no target "
                  f"({r['wall_s']} s)", flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"runs kept in {keep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
