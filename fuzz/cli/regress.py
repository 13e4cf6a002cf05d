"""The ``bump`` and ``bisect`` commands: comparing toolchains, for CI on a pin
bump and for finding the release that brought (or fixed) a bug.

Kept out of ``fuzz.cli.main`` so that module stays the campaign's command line;
this one only parses, calls ``fuzz.regress.bump`` / ``fuzz.regress.bisect`` and prints.
Exit statuses (README, "Toolchain bumps"): bump 0 no new bug, 1 new bugs
(``--strict``: anything to record), 2 bad input or a toolchain that does not
install, 4 nothing could be compared; bisect 0 an answer, 4 not comparable.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from fuzz.store import corpus
from fuzz.regress.bump import BumpOptions, run_bump
from fuzz.regress.bumpreport import bump_markdown, write_bump_files
from fuzz.regress.toolchains import current_toolchain, releases, toolchain_from
from fuzz.regress.bisect import (IREE_PACKAGES, BisectError, Step, bisect_releases, parse_range,
                         repro_test, versions_in)

__all__ = ["add_parsers", "comparison_options", "bump_command", "bisect_command", "EXIT_NOT_COMPARABLE"]

EXIT_NOT_COMPARABLE = 4


def comparison_options(parser: argparse.ArgumentParser, duration: Any, positive: Any, strict: str) -> None:
    """The options every two-toolchain comparison takes (bump, validate): how
    often a changed case is re-run, workers, job time limit, ``--strict``
    (``strict``: what else it fails on), where environments are cached."""
    parser.add_argument("--repeat", type=positive, default=3,
                        help="runs of a case that changed before it is called changed")
    parser.add_argument("--workers", type=positive, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=duration, default=300.0,
                        help="wall-clock limit per (sample, target) job (default 300s)")
    parser.add_argument("--strict", action="store_true",
                        help=f"exit 1 on anything the corpus should record ({strict}), not only "
                             "on what broke")
    parser.add_argument("--env-root", type=Path, default=None,
                        help="where toolchain environments (built from pins or wheels) are "
                             "cached (default ~/.cache/dlrm-fuzz/toolchains)")


def add_parsers(sub: Any, duration: Any, budget: Any, positive: Any, seed: Any) -> None:
    """Add ``bump`` and ``bisect`` to the ``dlrm-fuzz`` sub-command parsers."""
    bump = sub.add_parser("bump", help="compare two toolchains: new, fixed, moved bugs")
    bump.add_argument("--to", required=True, metavar="PINS|PATH",
                      help="the new toolchain: NAME==VERSION pins, comma-separated "
                           "(unnamed packages keep today's pins), a constraints.txt, or the "
                           "PATH of a virtual environment or folder of wheels (your own build)")
    bump.add_argument("--from", dest="from_", default=None, metavar="PINS|PATH",
                      help="the old toolchain, same forms (default: this install's pins)")
    bump.add_argument("--corpus", type=Path, default=Path("corpus"))
    bump.add_argument("--out", type=Path, default=Path("bump"),
                      help="folder for bump.md, bump.json, bump.junit.xml and the buckets "
                           "fuzzing found (default bump/)")
    bump.add_argument("--budget", type=budget, default=300.0,
                      help="fuzzing time on --to (default 5m; 0s: replay only)")
    bump.add_argument("--seed", type=seed, default=0)
    bump.add_argument("--targets", default=None, help="comma-separated targets to fuzz")
    comparison_options(bump, duration, positive, strict="fixed, moved, flaky, pre-existing")
    bisect = sub.add_parser("bisect", help="find the release that brought or fixed a bucket")
    bisect.add_argument("bucket", help="the bucket id (its folder in the corpus, with repro.py)")
    bisect.add_argument("--corpus", type=Path, default=Path("corpus"))
    what = bisect.add_mutually_exclusive_group(required=True)
    what.add_argument("--iree", metavar="OLD..NEW",
                      help="IREE releases (iree-base-compiler and iree-base-runtime together)")
    what.add_argument("--package", nargs=2, metavar=("NAME", "OLD..NEW"),
                      help="any other package with several releases, e.g. torch 2.11.0..2.13.0")
    bisect.add_argument("--json", type=Path, default=None, help="also write the answer as JSON")
    bisect.add_argument("--timeout", type=duration, default=900.0,
                        help="limit per repro run (default 900s)")
    bisect.add_argument("--env-root", type=Path, default=None)


def bump_command(console: Console, err: Console, args: argparse.Namespace) -> int:
    """``dlrm-fuzz bump``: compare two toolchains on the corpus and on fresh fuzzing."""

    to = toolchain_from(args.to)
    before = toolchain_from(args.from_) if args.from_ else current_toolchain()
    options = BumpOptions(to=to, from_=before, corpus_dir=args.corpus, out_dir=args.out,
                          budget_s=args.budget, seed=args.seed, targets=args.targets,
                          workers=args.workers, repeat=args.repeat, timeout_s=args.timeout,
                          env_root=args.env_root)
    report = run_bump(options, lambda line: err.print(f"bump: {line}", markup=False,
                                                      soft_wrap=True))
    files = write_bump_files(report, args.out, args.strict)
    console.print(bump_markdown(report, args.strict), markup=False, soft_wrap=True)
    err.print("bump: wrote " + ", ".join(str(f) for f in files), markup=False, soft_wrap=True)
    return report.exit_status(args.strict)


def bisect_command(console: Console, err: Console, args: argparse.Namespace) -> int:
    """``dlrm-fuzz bisect``: find the release that brought or fixed one stored bucket."""

    packages: tuple[str, ...] = IREE_PACKAGES if args.iree else (args.package[0],)
    low, high = parse_range(args.iree or args.package[1])
    available = releases(packages[0])
    for other in packages[1:]:  # lockstep packages: only releases both have
        both = set(releases(other))
        available = [v for v in available if v in both]
    versions = versions_in(available, low, high)
    try:
        entry = corpus.load_entry(args.corpus / args.bucket)
    except (OSError, ValueError) as exc:
        raise BisectError(f"bucket={args.bucket!r}: not a readable entry of {args.corpus} "
                          f"({exc}); list the buckets with `dlrm-fuzz corpus {args.corpus}`"
                          ) from None
    test = repro_test(args.corpus / args.bucket, packages, entry.signature, args.env_root,
                      args.timeout)
    console.print(f"bisect {args.bucket} over {'+'.join(packages)}: {len(versions)} releases "
                  f"{versions[0]}..{versions[-1]}", markup=False)

    def show(step: Step) -> None:
        console.print(f"  {step.version:<10} {step.mark.value:<4} exit {step.exit_code}  "
                      f"{step.seconds:.1f}s  {step.detail}", markup=False, soft_wrap=True)

    try:
        result = bisect_releases(versions, test, packages, show)
    except BisectError as exc:
        err.print(f"dlrm-fuzz: error: {exc}", markup=False, soft_wrap=True)
        return 2
    console.print(f"answer: {result.answer} ({len(result.steps)} of {len(versions)} releases "
                  f"tried, {sum(s.seconds for s in result.steps):.0f}s)", markup=False,
                  soft_wrap=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"bucket": args.bucket, **result.to_dict()},
                                        indent=2) + "\n")
    return 0 if result.comparable else EXIT_NOT_COMPARABLE
