"""The command line's argument types and the option groups several commands
share: durations, seeds, scales, ``--toolchain``, ``--target-plugin`` and the
region options (``--focus``, ``--config``, ``--preset``, ``--neighbours``,
``--rows-scale``) with the one-line errors a bad value gets.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Callable

from fuzz.model.config import DLRMConfig
from fuzz.model.focus import Focus, FocusError, load_config, make_focus
from fuzz.model.presets import preset_config, scale_rows
from strategies.draw import draw_samples

__all__ = ["EXIT_OK+EXIT_USAGE+EXIT_HARNESS", "parse_duration", "parse_duration_or_zero"]


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


def _fraction(name: str, example: str) -> Callable[[str], float]:
    """A parser of ``--NAME F``: a fraction > 0 and <= 1, else a one-line
    error naming the option and what its values mean (``example``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 < value <= 1:
            raise argparse.ArgumentTypeError(f"{name}={text!r}: must be a fraction > 0 and <= 1 "
                                             f"({example})")
        return value
    return parse


_share = _fraction("road-share", "e.g. 0.2; 1 sends every sample to every road target")
_shrink_share = _fraction("shrink-share", "e.g. 0.4; 1 lets shrinking take all the time "
                                          "generation has run")


def _seed(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"seed={text!r}: must be a non-negative integer")
    return int(text)


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


def _toolchain_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--toolchain", type=Path, default=None, metavar="PATH",
                        help="run in another toolchain: a virtual environment with your "
                             "torch-mlir / IREE build, or a folder of wheels to build one from "
                             "(with uv); the command runs again with PATH/bin/python")


def _plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target-plugin", action="append", default=[], metavar="MODULE:FACTORY",
                        help="add targets from a factory in your own module (repeatable); "
                             "entry points in the 'dlrm_fuzz.targets' group load too")
