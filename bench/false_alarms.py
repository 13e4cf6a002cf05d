"""False-alarm sweep: the oracle must never call a right answer wrong.

Draws samples from the campaign's own strategies (every dtype, every shape
class, every input layout; Hypothesis, seeded) but only of configurations
*without a known wrong-answer bug*, runs each on every CPU target and
lavapipe Vulkan through crash-proof workers, and judges each target against
the float64 reference exactly as a campaign does (per-dtype tolerance with the
reference's measured rounding spread). Any MISMATCH is printed in full: it is
a false alarm until shown to be a compiler bug. Compile, lowering and export
failures are counted but are not judgements of numbers.

"Without a known wrong-answer bug" is decided from the corpus and the support
matrix (README): every MISMATCH bucket known today is one of
  - ``mismatch-c37570aa5293``: torch-mlir's linalg lowering drops
    ``per_sample_weights`` (DLRM's weighted pooling, fixed or learned, and
    per-sample weights given as an input): such configs are not drawn;
  - ``mismatch-ba8828ac60f4``: float16 models on IREE's default (int64-less)
    Vulkan target: float16 samples are not sent to ``iree-vulkan-default*``.
Everything else the strategies generate is in.

Prints verdict counts per target, the margin (worst error / bound over every
judged output, 1.0 would be a failure) per dtype, and how many samples each
dtype and shape class had. Figures, not pass/fail (exit 0 either way).

Usage: python bench/false_alarms.py [--samples 200] [--seed 0]
       [--targets a,b] [--workers 2] [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

EXCLUDED_ON_TARGET = {"iree-vulkan-default": "float16", "iree-vulkan-default-dyn": "float16"}


def without_known_wrong_answers(sample: Any) -> bool:
    """True when no known MISMATCH bucket covers the sample's config (module doc)."""
    config = sample.config
    return config.weighted_pooling is None and not config.per_sample_weights


def sweep(samples: list[Any], targets: list[str], workers: int, cache_dir: Path,
          keep: Path | None = None) -> dict[str, Any]:
    from fuzz.engine.coverage import shape_class
    from fuzz.targets.catalog import EAGER, REFERENCE, resolve_targets
    from fuzz.workers.pool import WorkerPool
    from oracles import ReferenceFailed, Tolerance, Verdict, judge

    verdicts: dict[str, Counter[str]] = defaultdict(Counter)
    margins: dict[str, float] = defaultdict(float)
    alarms: list[dict[str, Any]] = []
    classes: Counter[str] = Counter()
    dtypes: Counter[str] = Counter()
    skipped_references = 0
    reference, eager = resolve_targets([REFERENCE, EAGER])
    compiled = resolve_targets(targets)
    started = time.monotonic()
    with WorkerPool(workers, timeout_s=300, cache_dir=cache_dir) as pool:
        for index, sample in enumerate(samples):
            dtype = sample.config.dtype
            chosen = [t for t in compiled if EXCLUDED_ON_TARGET.get(t.name) != dtype]
            results = pool.run([(reference, sample), (eager, sample), *[(t, sample) for t in chosen]])
            ref, eag, got = results[0], results[1], results[2:]
            rule = Tolerance().for_precision(dtype, sample.reduction_length())  # as a campaign's
            try:
                outcomes = {r.target: judge(r, ref, eag, rule) for r in got}
            except ReferenceFailed:  # PyTorch itself cannot run it: nothing to judge
                skipped_references += 1
                continue
            classes[shape_class(sample)] += 1
            dtypes[dtype] += 1
            for name, outcome in outcomes.items():
                verdicts[name][outcome.verdict.value] += 1
                ratio = outcome.numbers.get("worst_error_to_bound")  # judge's margin on a pass
                if outcome.verdict is Verdict.PASS and ratio is not None:
                    margins[dtype] = max(margins[dtype], ratio)
                if outcome.verdict is Verdict.MISMATCH:
                    alarms.append({"sample": index, "target": name, "error": outcome.error,
                                   "numbers": outcome.numbers,
                                   "config": sample.config.to_dict()})
                    print(f"MISMATCH {name}: {outcome.error} {outcome.numbers}", flush=True)
                    if keep is not None:  # the case itself, to replay by hand
                        _keep(keep / f"sample-{index}", sample)
            print(f"[{time.monotonic() - started:6.0f}s] sample {index + 1}/{len(samples)} "
                  f"{dtype} {shape_class(sample)}: "
                  + " ".join(f"{n}={o.verdict.value}" for n, o in outcomes.items()
                             if o.verdict is not Verdict.PASS), flush=True)
    return {"seconds": round(time.monotonic() - started, 1), "samples": len(samples),
            "judged_samples": sum(dtypes.values()), "reference_failed": skipped_references,
            "dtypes": dict(dtypes), "shape_classes": dict(classes),
            "verdicts": {k: dict(v) for k, v in sorted(verdicts.items())},
            "worst_error_to_bound_on_passes": {k: round(v, 4) for k, v in margins.items()},
            "mismatches": alarms}


def _keep(folder: Path, sample: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(sample.config.to_json())
    (folder / "seed.txt").write_text(str(sample.seed))
    (folder / "sample.npz").write_bytes(sample.npz_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default="", help="default: every available target")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None,
                        help="write each mismatching sample here (config.json, seed.txt, sample.npz)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from fuzz.targets.catalog import TARGETS, available_targets

    targets = args.targets.split(",") if args.targets else available_targets(TARGETS)
    from strategies.draw import draw_samples

    samples = draw_samples(args.samples, args.seed, without_known_wrong_answers)
    print(f"{len(samples)} samples, {len(targets)} targets: {','.join(targets)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="dlrm-fuzz-sweep-") as cache:
        report = sweep(samples, targets, args.workers, Path(cache), args.keep)
    summary = {k: v for k, v in report.items() if k != "mismatches"}
    print(json.dumps(summary, indent=1))
    print(f"MISMATCH (false alarms until shown to be compiler bugs): {len(report['mismatches'])}")
    for alarm in report["mismatches"]:
        print(json.dumps(alarm))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
