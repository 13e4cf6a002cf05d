"""The commands that read a corpus or the target table: ``targets``,
``corpus`` (and ``--rekey``), ``replay``, ``repro``, ``matrix``, ``report`` (the
digest) and ``presets``. Each returns the exit status; bad input is one
line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fuzz.cli.options import EXIT_OK, _focus, _model
from fuzz.cli.summary import _row
from fuzz.engine.records import CampaignOptions, Observed
from fuzz.engine.session import Session
from fuzz.model.focus import FocusError
from fuzz.store import corpus
from fuzz.store.corpus import CorpusError
from fuzz.targets.catalog import EAGER, FAKE_TARGETS, REFERENCE, Target
from fuzz.targets.plugins import target_table
from oracles.signature import KEY_VERSION
from fuzz.model.presets import PRESETS, preset_config
from fuzz.store.rekey import rekey
from fuzz.regress.replay import ReplayResult, record_state, replay_corpus
from fuzz.targets.versions import recorded_versions
from fuzz.regress.matrix import (
    FEATURES,
    Matrix,
    build_matrix,
    compare_matrices,
    matrix_markdown,
    rows_in_focus,
)
from fuzz.reports.markdown import digest_json, digest_markdown
from fuzz.reports.bugreport import BugReportJob, file_bug_report
from fuzz.workers.pool import WorkerPool


def _presets(console: Console, rows_scale: float) -> int:

    for name, preset in PRESETS.items():
        config = preset_config(name, rows_scale)
        console.print(f"{name}: {config.num_tables} tables, {sum(config.ln_emb)} rows in all "
                      f"(largest {max(config.ln_emb)}), m_spa={config.m_spa}, "
                      f"ln_bot={list(config.ln_bot)}, ln_top={list(config.ln_top)}, "
                      f"input_layout={config.input_layout}, upstream batch "
                      f"{preset.mini_batch_size}\n  from {preset.source}",
                      markup=False, soft_wrap=True)
    return EXIT_OK


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
    held, held_junk = corpus.load(path / corpus.HELD) if (path / corpus.HELD).is_dir() \
        else ([], [])
    if held:  # wrong answers waiting for a repro that reproduces (README "Phases")
        console.print(f"held back ({corpus.HELD}/, not in the corpus until their model repro "
                      f"reproduces): {len(held)}", markup=False)
        for entry in held:
            console.print(f"{entry.bucket}  {entry.verdict.value}  {entry.owner}  "
                          f"[{','.join(entry.seen_on)}]  {(entry.culprit or entry.error)[:160]}",
                          markup=False, soft_wrap=True)
    for line in junk + held_junk:
        err.print(f"dlrm-fuzz: warning: {line}", markup=False, soft_wrap=True)
    return EXIT_OK


def _rekey(console: Console, path: Path) -> int:

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
    with Session(options) as session:
        record = session.reproduce(args.bucket)
    console.print(f"{args.bucket}: {record.status.value} on {record.target}"
                  + (f"; now in {', '.join(record.now)}" if record.now else "")
                  + (f" ({record.note})" if record.note else ""), markup=False, soft_wrap=True)
    for target, stages in record.timings.items():
        times = ", ".join(f"{stage} {seconds:.2f}s" for stage, seconds in stages.items())
        console.print(f"  {target}: {times}", markup=False)
    if args.write:

        with WorkerPool(1, timeout_s=args.timeout) as pool:
            (answer,) = pool.run([BugReportJob(str(folder), table)])
        console.print(f"repro.py: {file_bug_report(args.corpus, args.bucket, answer)}",
                      markup=False)
    return 1 if record.status in (Observed.STILL_FAILING, Observed.MOVED) else EXIT_OK
