"""The ``validate`` command: one command for a lowering change, comparing
the toolchain build of a branch (``--toolchain PATH``) with the one it
branches from (``--against PATH``, default this install) in the region the
change touches.

Kept out of ``fuzz.cli.main`` like ``bump``: this module only parses, calls
``fuzz.regress.validate`` and prints. The helpers of the campaign's command
line it shares (durations, the focus flags and how they become a region) are
handed in by ``fuzz.cli.main``, so the two cannot drift apart and nothing
imports back up. Exit statuses are bump's (README, "Validating a lowering"):
0 nothing broke, 1 something broke (``--strict``: also anything the corpus
should record), 2 bad input or a toolchain that cannot run, 4 nothing could
be compared.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.console import Console

from fuzz.cli.regress import comparison_options
from fuzz.model.config import DLRMConfig
from fuzz.model.focus import Focus
from fuzz.regress.toolchains import ToolchainError, toolchain_from
from fuzz.regress.validate import ValidateError, ValidateOptions, run_validate
from fuzz.regress.validatereport import (validate_json, validate_junit, validate_markdown,
                                         write_validate_files)

if TYPE_CHECKING:
    from fuzz.regress.toolchains import Toolchain

__all__ = ["add_validate_parser", "validate_command"]


def add_validate_parser(sub: Any, duration: Any, budget: Any, positive: Any, seed: Any,
                        focus_options: Callable[..., None],
                        plugin_option: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``validate`` to the ``dlrm-fuzz`` sub-command parsers."""
    validate = sub.add_parser("validate", help="validate a lowering change: matrix, focused "
                                               "campaign and corpus replay on two toolchains")
    # dest: not "toolchain", which would make `main` re-run the whole command
    # inside that environment; here it is one side of two.
    validate.add_argument("--toolchain", dest="new_toolchain", required=True, metavar="PATH",
                          help="the new toolchain: a virtual environment with your torch-mlir / "
                               "IREE build, or a folder of wheels to build one from (with uv)")
    validate.add_argument("--against", default=None, metavar="PATH",
                          help="the old toolchain, same forms (default: this install)")
    validate.add_argument("--corpus", type=Path, default=Path("corpus"),
                          help="the stored cases to replay on both (default corpus/)")
    validate.add_argument("--out", type=Path, default=Path("validate"),
                          help="folder for validate.md, validate.json, validate.junit.xml, the "
                               "matrices and the buckets the campaign found (default validate/)")
    validate.add_argument("--format", choices=("md", "json", "junit"), default="md",
                          help="the form printed on stdout (all three are written to --out)")
    validate.add_argument("--budget", type=budget, default=300.0,
                          help="focused campaign time on --toolchain (default 5m; 0s: none)")
    validate.add_argument("--seed", type=seed, default=0)
    validate.add_argument("--targets", default=None,
                          help="comma-separated targets for the matrix and the campaign "
                               "(default: every target available on each side)")
    validate.add_argument("--seeds", type=positive, default=2, help="weight seeds per matrix row")
    comparison_options(validate, duration, positive, strict="fixed, moved, flaky, failing on both")
    plugin_option(validate)
    focus_options(validate, "the matrix rows, stored cases and campaign samples inside it")


def _path_toolchain(text: str, flag: str) -> Toolchain:
    """A toolchain named by path (a venv or a folder of wheels); pins are
    ``bump``'s business, and a missing folder is a one-line error here."""

    if "==" in text or text.endswith((".txt", ".toml")):
        raise ToolchainError(f"{flag}={text!r}: give the PATH of a virtual environment or a "
                             "folder of wheels; to compare pinned releases use `dlrm-fuzz bump`")
    return toolchain_from(text)


def _region_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The focus flags as given, for each side's own command line (a
    ``--config`` file by absolute path)."""
    out: list[str] = []
    if args.focus is not None:
        out += ["--focus", args.focus]
    if args.config is not None:
        out += ["--config", str(Path(args.config).absolute())]
    if args.preset is not None:
        out += ["--preset", args.preset]
    if args.neighbours:
        out.append("--neighbours")
    if args.rows_scale != 1.0:
        out += ["--rows-scale", repr(args.rows_scale)]
    return tuple(out)


def validate_command(console: Console, err: Console, args: argparse.Namespace,
                     focus_of: Callable[[argparse.Namespace], Focus | None],
                     model_of: Callable[[argparse.Namespace], tuple[DLRMConfig | None, str]]
                     ) -> int:
    """``dlrm-fuzz validate``: the three steps on both toolchains, one report."""

    focus = focus_of(args)  # a bad focus is a usage error before anything runs
    base, _ = model_of(args)
    toolchain = _path_toolchain(args.new_toolchain, "--toolchain")
    against = _path_toolchain(args.against, "--against") if args.against else None
    options = ValidateOptions(
        toolchain=toolchain, against=against, corpus_dir=args.corpus, out_dir=args.out,
        budget_s=args.budget, seed=args.seed, targets=args.targets, workers=args.workers,
        repeat=args.repeat, timeout_s=args.timeout, seeds=args.seeds, focus=focus, base=base,
        region_args=_region_args(args),
        extra_args=tuple(a for spec in args.target_plugin for a in ("--target-plugin", spec)),
        env_root=args.env_root)
    try:
        report = run_validate(options, lambda line: err.print(f"validate: {line}", markup=False,
                                                              soft_wrap=True))
    except ValidateError as exc:
        err.print(f"dlrm-fuzz: error: {exc}", markup=False, soft_wrap=True)
        return 2
    files = write_validate_files(report, args.out, args.strict)
    text = {"md": validate_markdown, "json": validate_json,
            "junit": validate_junit}[args.format](report, args.strict)
    console.print(text, markup=False, soft_wrap=True, end="")
    err.print("validate: wrote " + ", ".join(str(f) for f in files.values()), markup=False,
              soft_wrap=True)
    return report.exit_status(args.strict)
