"""The ``dlrm-fuzz`` command line: ``run`` a campaign, list ``targets``, show
the ``corpus``; ``bump`` and ``bisect`` live in ``fuzz.cli.regress``,
``validate`` in ``fuzz.cli.validate``.

Bad input (an unknown target, a malformed budget, a corpus path that is a
file) is one line on stderr and exit status 2, never a traceback. Exit
status 3 means dlrm-fuzz itself failed (a harness bug); findings in the
toolchain are not errors of the run and exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import NoReturn, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fuzz.store import corpus
from fuzz.engine.campaign import Campaign, CampaignOptions, CampaignReport, Finding
from fuzz.store.corpus import CorpusError
from oracles.signature import KEY_VERSION
from fuzz.engine.coverage import COLUMNS, FOCUS_ROW
from fuzz.model.config import DLRMConfig
from fuzz.model.focus import Focus, FocusError
from fuzz.engine.progress import CampaignProgress
from fuzz.workers.raypool import ClusterLost, RayUnavailable
from fuzz.engine.interrupt import EXIT_STATUS
from fuzz.regress.bisect import BisectError
from fuzz.regress.bump import BumpError
from fuzz.targets.cache import default_cache_dir
from fuzz.cli.regress import add_parsers, bisect_command, bump_command
from fuzz.cli.validate import add_validate_parser, validate_command
from fuzz.targets.plugins import PluginError, target_table
from fuzz.regress.toolchain_path import already_inside, reexec
from fuzz.regress.toolchains import ToolchainError
from fuzz.targets.catalog import EAGER, FAKE_TARGETS, REFERENCE, Target, UnavailableTarget, UnknownTarget
from fuzz.workers.pool import HarnessError

__all__ = ["main", "parse_duration"]

EXIT_OK, EXIT_USAGE, EXIT_HARNESS = 0, 2, 3
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``2m``, ``1.5h`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"duration={text!r}: give a positive number with an optional unit s, m or h (e.g. 60s)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def parse_duration_or_zero(text: str) -> float:
    """A duration that may be ``0`` (``bump --budget 0s``: replay only)."""
    if re.fullmatch(r"\s*0+(\.0*)?\s*[smh]?\s*", text):
        return 0.0
    return parse_duration(text)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"value={text!r}: must be a whole number >= 1")
    return int(text)


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"rows-scale={text!r}: must be a number > 0 (e.g. 1e-3)")
    return value


def _seed(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"seed={text!r}: must be a non-negative integer")
    return int(text)


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
                     help="comma-separated targets (default: every target available here; "
                          "see `dlrm-fuzz targets`)")
    _plugin_option(run)
    _toolchain_option(run)
    run.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1,
                     help="worker processes (default: number of cores)")
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
                     help="shrinking time per new bucket (default 60s; the shrink phase "
                          "takes at most a third of --budget)")
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


def _focus_options(run: argparse.ArgumentParser,
                   what: str = "every sample and shrink step holds it") -> None:
    """The flags that keep a campaign (or a matrix, a replay) inside a region
    (fuzz/model/focus.py)."""
    run.add_argument("--focus", default=None, metavar="KNOB=VALUE[,...]",
                     help="stay inside a region: any DLRMConfig field (pooling=mean, "
                          "ln_emb=[4,8]), input=empty_bags|batch_of_one|duplicate_index|"
                          f"last_row, shape=tiny|medium|large; {what}")
    model = run.add_mutually_exclusive_group()
    model.add_argument("--config", type=Path, default=None, metavar="FILE",
                       help="fuzz one model: a DLRMConfig JSON (as DLRMConfig.to_json writes "
                            "it, or a case.json); only weights, batches and inputs are drawn")
    model.add_argument("--preset", default=None, metavar="NAME",
                       help="fuzz one of upstream's models: readme, kaggle, terabyte "
                            "(`dlrm-fuzz presets`)")
    run.add_argument("--neighbours", action="store_true",
                     help="with --config/--preset: keep its tables and widths, vary the "
                          "knobs --focus leaves free")
    run.add_argument("--rows-scale", type=_scale, default=1.0, metavar="F",
                     help="with --config/--preset: every table's rows times F (at least 1), "
                          "e.g. 1e-3 for the Criteo tables")


def _model(args: argparse.Namespace) -> tuple[DLRMConfig | None, str]:
    """The model of --config FILE / --preset NAME, its tables scaled by
    --rows-scale, and its name for labels; (None, "") without either."""
    from fuzz.model.focus import load_config
    from fuzz.model.presets import preset_config, scale_rows

    if args.preset is not None:
        return preset_config(args.preset, args.rows_scale), f"preset {args.preset}"
    if args.config is not None:
        config = load_config(args.config)
        if args.rows_scale != 1.0:
            config = scale_rows(config, args.rows_scale)
        return config, f"config {args.config}"
    if args.rows_scale != 1.0:
        raise FocusError("--rows-scale: scales the tables of a given model; add --config FILE "
                         "or --preset NAME")
    return None, ""


def _focus(args: argparse.Namespace) -> Focus | None:
    """The region from --focus/--config/--preset/--neighbours/--rows-scale,
    checked (one sample must exist in it); None without them."""
    from fuzz.model.focus import make_focus
    from strategies.draw import draw_samples

    config, name = _model(args)
    if config is None and args.focus is None and not args.neighbours:
        return None
    if args.rows_scale != 1.0:
        name += f" (rows x{args.rows_scale:g})"
    label = " + ".join(part for part in (name, "neighbours" if args.neighbours else "",
                                         f"focus {args.focus}" if args.focus else "") if part)
    focus = make_focus(args.focus, config, args.neighbours, label)
    if getattr(args, "schedule", False):  # run only
        raise FocusError(f"{label}: --schedule repairs samples by switching their features "
                         f"off, which leaves the focus: drop --schedule")
    if not draw_samples(1, getattr(args, "seed", 0), focus=focus):
        raise FocusError(f"{label}: no generated sample lands in this region (a shape class "
                         f"too small for the pinned sizes, or input cases the layout rules "
                         f"out?): widen the focus")
    return focus


def _presets(console: Console, rows_scale: float) -> int:
    from fuzz.model.presets import PRESETS, preset_config

    for name, preset in PRESETS.items():
        config = preset_config(name, rows_scale)
        console.print(f"{name}: {config.num_tables} tables, {sum(config.ln_emb)} rows in all "
                      f"(largest {max(config.ln_emb)}), m_spa={config.m_spa}, "
                      f"ln_bot={list(config.ln_bot)}, ln_top={list(config.ln_top)}, "
                      f"input_layout={config.input_layout}, upstream batch "
                      f"{preset.mini_batch_size}\n  from {preset.source}",
                      markup=False, soft_wrap=True)
    return EXIT_OK


def _toolchain_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--toolchain", type=Path, default=None, metavar="PATH",
                        help="run in another toolchain: a virtual environment with your "
                             "torch-mlir / IREE build, or a folder of wheels to build one from "
                             "(with uv); the command runs again with PATH/bin/python")


def _plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target-plugin", action="append", default=[], metavar="MODULE:FACTORY",
                        help="add targets from a factory in your own module (repeatable); "
                             "entry points in the 'dlrm_fuzz.targets' group load too")


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


def _targets(console: Console, table: dict[str, Target]) -> int:
    grid = Table(title="targets (default run: every available compiled target)")
    grid.add_column("name", no_wrap=True)
    grid.add_column("available", no_wrap=True)
    grid.add_column("what it runs / why not and how to enable", overflow="fold")
    for name, target in table.items():
        if name in (REFERENCE, EAGER):
            _row(grid, name, "reference", target.description)
            continue
        ok, why = target.availability()
        _row(grid, name, "yes" if ok else "no",
                     target.description if ok else f"{target.description}\n-> {why}")
    for name, target in FAKE_TARGETS.items():
        _row(grid, name, "FAKE", target.description)
    console.print(grid)
    return EXIT_OK


def _corpus(console: Console, err: Console, path: Path) -> int:
    entries, junk = corpus.load(path)
    # One line per bucket, not a table: grep- and diff-friendly at any width.
    console.print(f"corpus {path}: {len(entries)} buckets", markup=False)
    for entry in entries:
        what = entry.culprit or entry.error
        console.print(f"{entry.bucket}  {entry.verdict.value}  {entry.owner}  "
                      f"[{','.join(entry.seen_on)}] ({'+'.join(entry.shape_modes)})  "
                      f"{what[:160]}", markup=False, soft_wrap=True)
    for line in junk:
        err.print(f"dlrm-fuzz: warning: {line}", markup=False, soft_wrap=True)
    return EXIT_OK


def _rekey(console: Console, path: Path) -> int:
    from fuzz.store.rekey import rekey

    done = rekey(path)
    for record in done:
        if record.status != "current":
            console.print(f"{record.old} -> {record.new}  {record.status}", markup=False)
    renamed = sum(r.status == "renamed" for r in done)
    console.print(f"corpus {path}: {renamed} of {len(done)} buckets renamed to bucket-key "
                  f"version {KEY_VERSION}", markup=False)
    return EXIT_OK


def _replay(console: Console, err: Console, args: argparse.Namespace) -> int:
    """Exit 0 when nothing unexpected happened (or without --strict); 1 with
    --strict on an unexpected outcome that --update did not record."""
    from fuzz.regress.replay import ReplayResult, record_state, replay_corpus
    from fuzz.targets.versions import recorded_versions

    lines = err if args.format == "json" else console

    def show(result: ReplayResult) -> None:
        now = f"  now in {', '.join(result.now)}" if result.status.value in ("MOVED", "FLAKY") else ""
        lines.print(f"{result.status.value:<9} {result.bucket}  {result.target}  "
                    f"{result.seconds:.1f}s ({result.runs} run{'s' if result.runs > 1 else ''})"
                    f"{now}{'  ' + result.note if result.note else ''}", markup=False,
                    soft_wrap=True)

    focus = _focus(args)
    results, junk = replay_corpus(args.path, target_table(args.target_plugin), args.repeat,
                                  args.workers, args.timeout,
                                  None if args.no_cache else args.cache, show, focus)
    for line in junk:
        err.print(f"dlrm-fuzz: warning: {line}", markup=False, soft_wrap=True)
    counts = Counter(r.status.value for r in results)
    inside = ""
    if focus is not None:
        inside = f"; {len(results)} of {len(corpus.load(args.path)[0])} stored cases inside " \
                 f"{focus.label}"
    lines.print("replay: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or
                              ("empty corpus" if focus is None else "no cases")) +
                f"; {sum(r.seconds for r in results):.1f}s{inside}",
                markup=False, soft_wrap=True)
    if args.format == "json":
        print(json.dumps({"toolchain": recorded_versions(), "results": [r.to_dict() for r in results],
                          "junk": junk, "focus": focus.label if focus else None}, indent=2))
    open_surprises = [r for r in results if r.unexpected
                      and not (args.update and record_state(args.path, r))]
    return 1 if args.strict and open_surprises else EXIT_OK


def _matrix(err: Console, args: argparse.Namespace) -> int:
    from fuzz.regress.matrix import (FEATURES, Matrix, build_matrix, compare_matrices,
                                     matrix_markdown, rows_in_focus)

    old = None
    if args.against is not None:
        try:
            old = Matrix.from_json(args.against.read_text())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorpusError(f"against={str(args.against)!r}: not a matrix JSON ({exc}); "
                              f"pass a file written by `dlrm-fuzz matrix --json`") from exc
    features = None if args.features is None else [f.strip() for f in args.features.split(",")]
    unknown = [f for f in features or [] if f not in FEATURES]
    if unknown:
        raise CorpusError(f"features={unknown[0]!r}: unknown; choose from {', '.join(FEATURES)}")
    focus = _focus(args)
    base, _ = _model(args)
    if focus is not None:
        features = rows_in_focus(focus, base, features)
        if not features:
            raise FocusError(f"{focus.label}: no matrix row lies inside it (each row is one "
                             f"feature on {'that' if base else 'a minimal'} model, a batch of "
                             f"3): widen the focus, or fuzz the region with `dlrm-fuzz run "
                             f"--focus`")
    names = None if args.targets is None else tuple(
        n.strip() for n in args.targets.split(",") if n.strip())
    options = CampaignOptions(targets=names, table=target_table(args.target_plugin),
                              workers=args.workers, timeout_s=args.timeout,
                              cache_dir=None if args.no_cache else args.cache)

    def progress(feature: str, row: dict[str, str]) -> None:
        failing = sum(cell != "PASS" for cell in row.values())
        err.print(f"  {feature}: {failing}/{len(row)} targets fail", markup=False)

    matrix = build_matrix(options, features, args.seeds, progress, base)
    sys.stdout.write(matrix_markdown(matrix))
    sys.stdout.write(f"\n{len(matrix.cells)} features x {len(matrix.targets)} targets, "
                     f"{args.seeds} seeds each, {matrix.seconds:.0f}s"
                     + (f" (the rows inside {focus.label})" if focus else "") + "\n")
    if args.json is not None:
        args.json.write_text(matrix.to_json())
    if old is not None:
        changes = compare_matrices(old, matrix)
        sys.stdout.write(f"\nchanged against {args.against}: {len(changes)} cells\n")
        sys.stdout.write("".join(f"- {line}\n" for line in changes))
    return EXIT_OK


def _digest(err: Console, path: Path, fmt: str) -> int:
    from fuzz.reports.markdown import digest_json, digest_markdown

    entries, junk = corpus.load(path)
    sys.stdout.write(digest_json(entries) if fmt == "json" else digest_markdown(entries))
    for line in junk:
        err.print(f"dlrm-fuzz: warning: {line}", markup=False, soft_wrap=True)
    return EXIT_OK


def _repro(console: Console, err: Console, args: argparse.Namespace) -> int:
    """Exit 1 while the stored bug reproduces, 0 once it is fixed (as repro.py does)."""
    folder = args.corpus / args.bucket
    if not (folder / "case.json").is_file():
        raise CorpusError(f"bucket={args.bucket!r}: no such case in {str(args.corpus)!r}; "
                          f"list them with `dlrm-fuzz corpus {args.corpus}`")
    try:
        entry = corpus.load_entry(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"bucket={args.bucket!r}: unreadable ({exc}); it is kept as it is") from exc
    table = target_table(args.target_plugin)
    options = CampaignOptions(corpus_dir=args.corpus, table=table, targets=(entry.target,),
                              timeout_s=args.timeout, workers=1, replay=False, shrink=False)
    campaign = Campaign(options)
    record = campaign.reproduce(args.bucket)
    console.print(f"{args.bucket}: {record.status} on {record.target}"
                  + (f"; now in {', '.join(record.now)}" if record.now else "")
                  + (f" ({record.note})" if record.note else ""), markup=False, soft_wrap=True)
    for target, stages in record.timings.items():
        times = ", ".join(f"{stage} {seconds:.2f}s" for stage, seconds in stages.items())
        console.print(f"  {target}: {times}", markup=False)
    if args.write:
        from fuzz.reports.bugreport import BugReportJob, file_bug_report
        from fuzz.workers.pool import WorkerPool

        with WorkerPool(1, timeout_s=args.timeout) as pool:
            (answer,) = pool.run([BugReportJob(str(folder), table)])
        console.print(f"repro.py: {file_bug_report(args.corpus, args.bucket, answer)}",
                      markup=False)
    return 1 if record.status in ("still-failing", "moved") else EXIT_OK


def _run(console: Console, err: Console, args: argparse.Namespace) -> int:
    from fuzz.store.seed import default_corpus_dir, seed_corpus

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
                              workers=args.workers,
                              timeout_s=args.timeout, memory_mb=args.memory_mb,
                              max_samples=args.max_samples,
                              cache_dir=None if args.no_cache else args.cache,
                              cache_mb=args.cache_mb, replay=not args.no_replay,
                              shrink=not args.no_shrink, shrink_budget_s=args.shrink_budget,
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


def _summary(console: Console, report: CampaignReport) -> None:
    head = Table(title="campaign summary", show_header=False)
    _row(head, "samples", str(report.samples))
    if report.coverage.focus is not None:
        inside = report.coverage.counts.get(FOCUS_ROW, Counter())["generated"]
        _row(head, "focus", f"{report.coverage.focus.label}: {inside} samples inside")
    _row(head, "targets", ", ".join(report.targets))
    _row(head, "configs compiled", str(report.configs_compiled))
    _row(head, "batches checked", str(report.batches_checked))
    _row(head, "elapsed", f"{report.elapsed_s:.1f}s")
    _row(head, "failures", str(len(report.findings)))
    _row(head, "new buckets", str(len(report.new_buckets)))
    _row(head, "workers replaced", str(report.workers_replaced))
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(report.stage_seconds.items()))
    _row(head, "time in stages", stages or "-")
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in report.phase_seconds.items())
    if report.shrink_s:
        phases += f" (of which shrinking {report.shrink_s:.1f}s)"
    _row(head, "time in phases", phases or "-")
    ready, unconfirmed = report.actionable()
    if report.new_buckets:
        line = f"{len(ready)}/{len(report.new_buckets)} new buckets shrunk and reproducing"
        if unconfirmed:
            line += "; unconfirmed: " + "; ".join(f"{bucket} ({why})"
                                                  for bucket, why in unconfirmed.items())
        _row(head, "actionable", line)
    _row(head, "localized / ablated", f"{report.localizations} / {report.ablations}")
    if report.draws_checked:
        _row(head, "extra weight draws", f"{report.draws_checked} checked on their sample's "
                                         f"artifact, {report.draws_reseeded} failed and re-run")
    _row(head, "workers busy", f"{report.busy_fraction:.0%} of {report.workers} x "
                               f"{report.elapsed_s:.0f}s")
    if report.allocation:
        _row(head, "re-run on every target", f"{report.confirm_runs} samples (a new bucket "
                                             "seen on a partial schedule)")
        _row(head, "sent to no target", f"{report.unscheduled} samples (every program group "
                                        "would have landed in known buckets)")
    if report.cut_jobs:
        _row(head, "cut when the budget ended",
             f"{report.cut_jobs} queued jobs dropped, {report.cut_samples} samples not judged"
             + "".join(f"; {line}" for line in report.cut_unfiled))
    if report.skipped:
        _row(head, "skipped samples", f"{len(report.skipped)} (eager PyTorch ran out of a "
                                      "worker's memory: raise --memory-mb to check them)")
    if report.interrupted is not None:
        _row(head, "stopped by", signal.Signals(report.interrupted).name)
    console.print(head)
    if report.replays:
        replay = Table(title="replay of the stored cases")
        for column in ("bucket", "target", "status", "now in", "seconds"):
            replay.add_column(column, overflow="fold")
        for replayed in report.replays:
            _row(replay, replayed.bucket, replayed.target,
                           replayed.status + (f" ({replayed.note})" if replayed.note else ""),
                           ", ".join(replayed.now) or "-", f"{replayed.seconds:.1f}")
        console.print(replay)
    verdicts = Table(title="outcomes by target and verdict")
    for column in ("target", "verdict", "count"):
        verdicts.add_column(column)
    for (target, verdict), count in sorted(report.outcomes.items()):
        _row(verdicts, target, verdict, str(count))
    console.print(verdicts)
    if report.allocation:
        allocation = Table(title="schedule: samples per program group (fewer where the "
                                 "outcome keeps being the same known bucket)")
        for column in ("program group", "cells", "offered", "run", "skipped"):
            allocation.add_column(column, justify="left" if column == "program group" else "right")
        for group, cells, offered, run in report.allocation:
            _row(allocation, group, str(cells), str(offered), str(run), str(offered - run))
        console.print(allocation)
    if report.coverage.counts:
        console.print(_coverage_table(report))
    if report.new_buckets:
        found = Table(title="new failure buckets")
        for column in ("bucket", "owner on targets", "verdict", "culprit / first error line",
                       "repro.py"):
            found.add_column(column, overflow="fold")
        for finding in report.new_buckets:
            o = finding.outcome
            _row(found, finding.bucket, f"{finding.owner} on {', '.join(finding.targets)}",
                          o.verdict.value, (finding.culprit or o.error)[:120],
                          report.repro_status.get(finding.bucket, "-"))
        console.print(found)
    if report.shrinks:
        shrunk = Table(title="shrinking (size: tables/examples/indices)")
        for column in ("bucket", "target", "before", "after", "steps", "rejected", "steps/s",
                       "seconds", "stored"):
            shrunk.add_column(column, overflow="fold")
        for record in report.shrinks:
            r = record.record
            seconds, tried = _number(r.get("seconds")), _number(r.get("steps_tried"))
            after = str(r["skipped"]) if "skipped" in r else \
                f"one op: {r.get('op')}" if r.get("stopped") == "single-op" \
                else _size(r.get("size_after"))
            _row(shrunk, record.bucket, record.target, _size(r.get("size_before")), after,
                           f"{r.get('steps_accepted', 0)}/{r.get('steps_tried', 0)}",
                           str(r.get("steps_rejected", 0)),
                           f"{tried / seconds:.1f}" if seconds > 0 else "-",
                           f"{seconds:.1f}",
                           "replaced" if record.replaced else "kept")
        console.print(shrunk)


def _coverage_table(report: CampaignReport) -> Table:
    """Samples per knob value, and how far at least one target got with them."""
    focus = report.coverage.focus
    table = Table(title="coverage: samples per knob value (got through, on at least one target)"
                  + (f"; focus: {focus.label}" if focus is not None else ""))
    for column in ("knob value", *COLUMNS):
        table.add_column(column, justify="left" if column == "knob value" else "right")
    for knob, counts in report.coverage.rows():
        _row(table, knob, *(str(count) for count in counts))
    return table


def _number(value: object) -> float:
    """A count or duration read from a JSON record; 0 when absent."""
    return float(value) if isinstance(value, (int, float)) else 0.0


def _row(table: Table, *cells: str) -> None:
    """Cells as plain text: error lines and culprits hold brackets
    (``[per_sample_weights]``) that rich would otherwise take for markup."""
    table.add_row(*(Text(cell) for cell in cells))


def _size(size: object) -> str:
    if not isinstance(size, dict):
        return "-"
    return f"{size.get('tables', '?')}/{size.get('examples', '?')}/{size.get('indices', '?')}"
