"""The ``dlrm-fuzz`` command line: the parser, the dispatch to each command,
and ``run`` (a campaign); the corpus commands live in ``fuzz.cli.corpus``,
``bump`` and ``bisect`` in ``fuzz.cli.regress``, ``validate`` in
``fuzz.cli.validate``, the printed summary in ``fuzz.cli.summary``.

Bad input (an unknown target, a malformed budget, a corpus path that is a
file) is one line on stderr and exit status 2, never a traceback. Exit
status 3 means dlrm-fuzz itself failed (a harness bug); findings in the
toolchain are not errors of the run and exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from rich.console import Console

from fuzz.cli.corpus import _corpus, _digest, _matrix, _presets, _rekey, _replay, _repro, _targets
from fuzz.cli.options import (
    EXIT_HARNESS,
    EXIT_OK,
    EXIT_USAGE,
    _focus,
    _focus_options,
    _model,
    _plugin_option,
    _positive_int,
    _scale,
    _seed,
    _share,
    _shrink_share,
    _toolchain_option,
    parse_duration,
    parse_duration_or_zero,
)
from fuzz.cli.regress import add_parsers, bisect_command, bump_command
from fuzz.cli.summary import _summary
from fuzz.cli.validate import add_validate_parser, validate_command
from fuzz.engine.campaign import Campaign, CampaignOptions, CampaignReport, Finding
from fuzz.engine.interrupt import EXIT_STATUS
from fuzz.engine.progress import CampaignProgress
from fuzz.model.focus import FocusError
from fuzz.regress.bisect import BisectError
from fuzz.regress.bump import BumpError
from fuzz.regress.toolchain_path import already_inside, reexec
from fuzz.regress.toolchains import ToolchainError
from fuzz.store.corpus import CorpusError
from fuzz.targets.cache import default_cache_dir
from fuzz.targets.catalog import Target, UnavailableTarget, UnknownTarget
from fuzz.targets.plugins import PluginError, target_table
from fuzz.workers.pool import HarnessError
from fuzz.workers.raypool import ClusterLost, RayUnavailable
from fuzz.store.seed import default_corpus_dir, seed_corpus

__all__ = ["main", "parse_duration"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dlrm-fuzz", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run a fuzzing campaign")
    run.add_argument("--budget", type=parse_duration, default=60.0,
                     help="fuzzing time, e.g. 60s, 5m (default 60s; worker start-up not counted)")
    run.add_argument("--seed", type=_seed, default=0, help="Hypothesis seed (default 0)")
    run.add_argument("--corpus", type=Path, default=None,
                     help="your corpus: where this campaign stores new and smaller cases "
                          "(default $DLRM_FUZZ_CORPUS or ~/.local/share/dlrm-fuzz/corpus; "
                          "--corpus corpus/ writes into the committed one)")
    run.add_argument("--seed-corpus", type=Path, default=None, metavar="DIR",
                     help="stored cases to start from, only read: the ones --corpus lacks "
                          "are copied into it first (default without --corpus: corpus/, the "
                          "committed regression suite, when it exists)")
    run.add_argument("--targets", default=None,
                     help="comma-separated targets or groups: 'default' (every target "
                          "available here, what runs without --targets), 'roads' (one target "
                          "per road into IREE and owner); see `dlrm-fuzz targets`")
    _plugin_option(run)
    _toolchain_option(run)
    run.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1,
                     help="worker processes (default: number of cores)")
    run.add_argument("--bug-workers", type=_seed, default=0, metavar="N",
                     help="worker processes beside --workers that take bug work only (shrink "
                          "steps, repros), so it never waits for a sample's compile "
                          "(default 0: one shared pool; worth it with cores to spare; not "
                          "with --ray)")
    run.add_argument("--road-share", type=_share, default=0.2, metavar="F",
                     help="the most of the targets' time the road targets (iree-turbine, ONNX, "
                          "onnxruntime) take beside the FX road's: they get a sample only while "
                          "under it (default 0.2; 1: every sample to every road target)")
    run.add_argument("--timeout", type=parse_duration, default=120.0,
                     help="wall-clock limit per (sample, target) job (default 120s)")
    run.add_argument("--memory-mb", type=_positive_int, default=8192,
                     help="memory cap (RLIMIT_DATA) per worker in MiB (default 8192)")
    run.add_argument("--max-samples", type=_positive_int, default=None,
                     help="stop after this many samples even if budget remains")
    run.add_argument("--cache", type=Path, default=default_cache_dir(),
                     help="artifact cache folder (default $DLRM_FUZZ_CACHE or ~/.cache/dlrm-fuzz)")
    run.add_argument("--no-cache", action="store_true", help="export, lower and compile everything afresh")
    run.add_argument("--cache-mb", type=_positive_int, default=2048,
                     help="artifact cache size bound in MiB (default 2048)")
    run.add_argument("--no-replay", action="store_true",
                     help="skip the replay phase (re-running every stored case first)")
    run.add_argument("--no-shrink", action="store_true",
                     help="skip the shrink phase (minimizing each new bucket's case)")
    run.add_argument("--shrink-budget", type=parse_duration, default=60.0,
                     help="shrinking time per new bucket (default 60s); shrinking runs "
                          "beside generation, at most --shrink-share of the time it has run")
    run.add_argument("--shrink-share", type=_shrink_share, default=0.4, metavar="F",
                     help="the most of the time generation has run that shrinking takes "
                          "(default 0.4): lower checks more samples, higher leaves more "
                          "buckets shrunk when the budget ends")
    run.add_argument("--ray", default=None, metavar="ADDRESS",
                     help="run the workers as Ray actors: 'local' (a cluster of this process), "
                          "'auto' (the one `ray start` made) or HOST:PORT; needs "
                          "pip install 'dlrm-fuzz[ray]'")
    run.add_argument("--ray-gpu-workers", type=_seed, default=0, metavar="N",
                     help="with --ray: N more actors reserving one GPU each, for GPU targets")
    schedule = run.add_mutually_exclusive_group()
    schedule.add_argument("--schedule", action="store_true",
                          help="fewer samples to targets that keep landing in the same known "
                               "buckets, repairing around known failures (default: every "
                               "sample to every target, which found more bugs: "
                               "bench/discovery.py)")
    schedule.add_argument("--no-schedule", action="store_true",
                          help="every sample to every target (the default)")
    run.add_argument("--no-report", action="store_true",
                     help="skip writing repro.py, tool files and REPORT.md for new buckets")
    run.add_argument("--summary-json", type=Path, default=None, metavar="PATH",
                     help="also write the campaign's headline figures as JSON (for tools)")
    _focus_options(run)
    presets = sub.add_parser("presets", help="list the --preset models (upstream's configurations)")
    presets.add_argument("--rows-scale", type=_scale, default=1.0, metavar="F",
                         help="show the table sizes scaled by F")
    targets = sub.add_parser("targets", help="list the targets, whether each runs here, and why not")
    _plugin_option(targets)
    show = sub.add_parser("corpus", help="list the failures stored in a corpus folder")
    show.add_argument("path", type=Path, nargs="?", default=Path("corpus"))
    show.add_argument("--rekey", action="store_true",
                      help="rename buckets stored under an older bucket-key recipe to today's "
                           "ids (replay would call them moved otherwise)")
    repro = sub.add_parser("repro", help="re-run one stored case: does it still reproduce?")
    repro.add_argument("bucket", help="the bucket id (its folder name in the corpus)")
    repro.add_argument("--corpus", type=Path, default=Path("corpus"))
    repro.add_argument("--timeout", type=parse_duration, default=300.0,
                       help="wall-clock limit per target (default 300s)")
    repro.add_argument("--write", action="store_true",
                       help="also (re)write and check repro.py, the tool files and REPORT.md")
    _plugin_option(repro)
    _toolchain_option(repro)
    replay = sub.add_parser("replay", help="re-run every stored case: the corpus as a regression suite")
    replay.add_argument("path", type=Path, nargs="?", default=Path("corpus"))
    replay.add_argument("--repeat", type=_positive_int, default=3,
                        help="runs of a case that does not behave as recorded (default 3; "
                             "runs that disagree make it FLAKY)")
    replay.add_argument("--strict", action="store_true",
                        help="exit 1 on XPASS, MOVED, REGRESSED or FLAKY")
    replay.add_argument("--update", action="store_true",
                        help="record XPASS as fixed, MOVED as moved, REGRESSED as failing again")
    replay.add_argument("--format", choices=("text", "json"), default="text",
                        help="json: one document on stdout (the lines go to stderr), "
                             "for tools such as `dlrm-fuzz bump`")
    replay.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1)
    replay.add_argument("--timeout", type=parse_duration, default=300.0,
                        help="wall-clock limit per (case, target) job (default 300s)")
    replay.add_argument("--cache", type=Path, default=default_cache_dir())
    replay.add_argument("--no-cache", action="store_true")
    _plugin_option(replay)
    _toolchain_option(replay)
    _focus_options(replay, "replay only the stored cases inside a region")
    matrix = sub.add_parser("matrix", help="the lowering support matrix: DLRM features x targets")
    matrix.add_argument("--targets", default=None, help="comma-separated (default: all available)")
    matrix.add_argument("--features", default=None, help="comma-separated rows (default: all)")
    matrix.add_argument("--seeds", type=_positive_int, default=2, help="weight seeds per feature")
    matrix.add_argument("--json", type=Path, default=None, help="also write the matrix as JSON")
    matrix.add_argument("--against", type=Path, default=None,
                        help="a matrix JSON from before a change: list the cells that changed")
    matrix.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1)
    matrix.add_argument("--timeout", type=parse_duration, default=300.0)
    matrix.add_argument("--cache", type=Path, default=default_cache_dir())
    matrix.add_argument("--no-cache", action="store_true")
    _plugin_option(matrix)
    _toolchain_option(matrix)
    _focus_options(matrix, "only the rows inside a region; with --config/--preset the "
                   "features go on that model")
    add_parsers(sub, parse_duration, parse_duration_or_zero, _positive_int, _seed)
    add_validate_parser(sub, parse_duration, parse_duration_or_zero, _positive_int, _seed,
                        _focus_options, _plugin_option)
    digest = sub.add_parser("report", help="a digest of the corpus grouped by project")
    digest.add_argument("path", type=Path, nargs="?", default=Path("corpus"))
    digest.add_argument("--format", choices=("md", "json"), default="md")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``dlrm-fuzz`` command: run the subcommand, turning known errors into exit statuses."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    # Piped output (CI logs) gets a wide console instead of rich's 80 columns.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True, highlight=False)
    try:
        toolchain = getattr(args, "toolchain", None)
        if toolchain is not None and not already_inside(toolchain):
            # Replaces this process (fuzz.regress.toolchain_path); returns only by raising.
            reexec(toolchain, argv, lambda line: err.print(line, markup=False, soft_wrap=True))
        if args.command == "presets":
            return _presets(console, args.rows_scale)
        if args.command == "targets":
            return _targets(console, target_table(args.target_plugin))
        if args.command == "corpus":
            if args.rekey:
                return _rekey(console, args.path)
            return _corpus(console, err, args.path)
        if args.command == "report":
            return _digest(err, args.path, args.format)
        if args.command == "repro":
            return _repro(console, err, args)
        if args.command == "replay":
            return _replay(console, err, args)
        if args.command == "matrix":
            return _matrix(err, args)
        if args.command == "bump":
            return bump_command(console, err, args)
        if args.command == "bisect":
            return bisect_command(console, err, args)
        if args.command == "validate":
            return validate_command(console, err, args, _focus, _model)
        return _run(console, err, args)
    except (UnknownTarget, UnavailableTarget, CorpusError, PluginError, ToolchainError,
            BumpError, BisectError, RayUnavailable, FocusError) as exc:
        err.print(f"dlrm-fuzz: error: {exc}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    except ClusterLost as exc:  # the cluster failed, not the toolchain and not dlrm-fuzz
        err.print(f"dlrm-fuzz: error: {exc}", markup=False, soft_wrap=True)
        return EXIT_HARNESS
    except HarnessError as exc:
        err.print(f"dlrm-fuzz: internal error (a bug in dlrm-fuzz, please report): {exc}",
                  markup=False, soft_wrap=True)
        return EXIT_HARNESS


def _run(console: Console, err: Console, args: argparse.Namespace) -> int:

    if args.corpus is None:  # the user's corpus, started from the committed one
        args.corpus = default_corpus_dir()
        if args.seed_corpus is None:
            args.seed_corpus = Path("corpus")
    focus = _focus(args)  # before anything is written: a bad focus is a usage error
    seeded = seed_corpus(args.seed_corpus, args.corpus)
    names = None if args.targets is None else tuple(
        n.strip() for n in args.targets.split(",") if n.strip())
    options = CampaignOptions(budget_s=args.budget, seed=args.seed, corpus_dir=args.corpus,
                              targets=names, table=target_table(args.target_plugin),
                              workers=args.workers, bug_workers=args.bug_workers,
                              road_share=args.road_share, timeout_s=args.timeout, memory_mb=args.memory_mb,
                              max_samples=args.max_samples,
                              cache_dir=None if args.no_cache else args.cache,
                              cache_mb=args.cache_mb, replay=not args.no_replay,
                              shrink=not args.no_shrink, shrink_budget_s=args.shrink_budget,
                              shrink_share=args.shrink_share,
                              report=not args.no_report, schedule=args.schedule,
                              ray=args.ray, ray_gpu_workers=args.ray_gpu_workers,
                              focus=focus)

    def on_start(targets: list[Target]) -> None:
        console.print(f"dlrm-fuzz: seed={args.seed} budget={args.budget:g}s "
                      f"targets={','.join(t.name for t in targets)} workers={args.workers} "
                      f"corpus={args.corpus}"
                      + (f" (seeded with {seeded} cases from {args.seed_corpus})" if seeded
                         else ""), markup=False, soft_wrap=True)
        if focus is not None:
            console.print(f"dlrm-fuzz: focus: {focus.label} (every generated sample and "
                          f"shrink step stays inside)", markup=False, soft_wrap=True)

    progress = CampaignProgress(console, args.budget)

    def on_finding(finding: Finding, report: CampaignReport) -> None:
        if finding.new:
            o = finding.outcome
            what = finding.culprit or o.error[:200]
            progress.print(f"  NEW  sample {finding.sample_index}: {finding.verdict.value} "
                           f"{finding.owner} on {','.join(finding.targets)} -> {finding.path}"
                           f"\n       {what}")

    try:
        report = Campaign(options, on_finding, on_start, progress.phase, progress.update).run()
    finally:  # the status line goes before the summary (or a traceback) is printed
        progress.close()
    _summary(console, report)
    if args.summary_json is not None:
        args.summary_json.write_text(json.dumps(report.summary(), indent=2) + "\n")
    for line in report.harness_errors:
        err.print(f"dlrm-fuzz: harness error: {line}", markup=False, soft_wrap=True)
    if report.interrupted is not None:
        status = EXIT_STATUS.get(signal.Signals(report.interrupted), 128 + report.interrupted)
        err.print(f"dlrm-fuzz: stopped by {signal.Signals(report.interrupted).name}; "
                  f"the summary above is what was found so far", markup=False)
        return status
    return EXIT_HARNESS if report.harness_errors else EXIT_OK
