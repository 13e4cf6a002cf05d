"""Throughput figures for dlrm-fuzz, printed in one run (never pass/fail).

1. Input batches checked per second against one compiled artifact (tiny
   config, iree-cpu): each check runs the compiled module, eager float32 and
   eager float64, and compares. Aim: >= 300/s.
2. Configs (samples) checked per minute across the default targets (every
   available one), cold cache.
3. A campaign replayed against a warm artifact cache versus cold. Aim: warm
   >= 10x faster.
4. Samples checked (sent to at least one target) per minute over the
   default targets, the old engine (a barrier after each sample, every
   sample to every target, weights inline: one compile per weight seed, an
   export and import per output type) vs today's (no barrier, the
   scheduler, weights as inputs for most samples, one export and import per
   shape mode), each of seeds 1-3 on both, same budget, cold cache. Aim:
   >= 3x. The old engine is the product at the git tag ``old-engine`` (the
   last commit with its switches; ``--old-rev`` picks another), unpacked
   with ``git archive`` and run in a subprocess: today's product has no
   such switches. A clone without the tag needs ``git fetch --tags``.
5. Time to the first discovery of each bucket over seeds 1..3 (today's
   engine): median and max per bucket.
6. Busy fraction of today's engine: job seconds / (wall seconds x workers).
   Aim: >= 0.9.
7. Seconds from model to compiled module (export + import + iree-cpu
   compile) for a 10-row vs a 10^6-row table, weights inline vs as inputs.
   Aim: ratio <= 1.3 with weights as inputs.
8. Today's engine with its workers as Ray actors on a local 2-CPU cluster
   (``--ray local``) vs the local pool: samples checked per minute, same
   seed and budget (needs the ``ray`` extra). Per-job costs (start-up, round
   trip, memory): python bench/ray_overhead.py.

Usage: python bench/throughput.py [--seconds 60] [--samples 4] [--targets a,b]
       [--campaign 180] [--skip 1,2,3,8] [--old-rev old-engine]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# The checkout this script belongs to: today's engine, and the git repository
# the old engine's tree is taken from.
CHECKOUT = Path(__file__).resolve().parents[1]


def ratio(a: float, b: float) -> float:
    """a / b, with an empty b (nothing measured) not a crash."""
    return a / max(b, 1e-9)


def batches_per_second(seconds: float) -> tuple[float, float]:
    import torch

    from fuzz.targets import pipeline
    from fuzz.model.config import DLRMConfig
    from fuzz.model.dlrm import build, build_reference, to_torch
    from oracles import compare
    from strategies import batches
    from hypothesis import HealthCheck, given, settings

    config = DLRMConfig(m_spa=4, ln_emb=(10, 20, 30), ln_bot=(3, 4), ln_top=(10, 1))
    model, reference = build(config, 0), build_reference(config, 0)
    drawn: list = []

    @settings(max_examples=200, database=None, suppress_health_check=list(HealthCheck))
    @given(batches(config))
    def collect(batch: object) -> None:
        drawn.append(batch)

    collect()
    shape = [a.shape for a in drawn[0].flat()]
    same = [b for b in drawn if [a.shape for a in b.flat()] == shape] or drawn[:1]
    args = to_torch(drawn[0].flat(), config.num_tables)
    mlir = pipeline.lower(pipeline.export(model, args), "linalg-on-tensors")
    module = pipeline.LoadedModule(pipeline.compile_vmfb(
        mlir, "llvm-cpu", ["--iree-llvmcpu-target-cpu=host"]), "local-task")

    def timed(check: bool) -> float:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 2:
            batch = same[count % len(same)]
            got = module(batch.flat())[0]
            if check:
                with torch.inference_mode():
                    ref = reference(*to_torch(batch.flat(), 3, torch.float64)).numpy()
                    eager = model(*to_torch(batch.flat(), 3)).numpy()
                assert compare(ref, eager, got).ok
            count += 1
        return count / (time.perf_counter() - start)

    return timed(False), timed(True)


def campaign_seconds(cache_dir: Path | None, samples: int, targets: tuple[str, ...] | None,
                     corpus_dir: Path) -> tuple[float, int]:
    from fuzz.engine.campaign import CampaignOptions, run_campaign

    options = CampaignOptions(budget_s=3600, seed=0, corpus_dir=corpus_dir, targets=targets,
                              workers=2, max_samples=samples, cache_dir=cache_dir,
                              replay=False, shrink=False)  # generation throughput only
    start = time.perf_counter()
    report = run_campaign(options)
    return time.perf_counter() - start, report.samples


@dataclass(frozen=True)
class Engine:
    """An engine figures 4-6 and 8 measure: the product in ``tree`` run with
    the campaign options ``policy``. The old engine is a policy of an old
    tree (switches today's product no longer has), so the bench, not the
    product, carries it."""

    name: str  # "old" or "new", as the figures call them
    tree: Path
    policy: dict[str, object] = field(default_factory=dict)


# Today's engine with the scheduler on (its default is off: see CampaignOptions).
TODAY = Engine("new", CHECKOUT, {"schedule": True})
# The options the old tree's CampaignOptions took to run as before this engine.
OLD_POLICY: dict[str, object] = {"schedule": False, "barrier": True, "inline_weights": True,
                                 "shared_import": False}


def commit_of(rev: str) -> str:
    """The commit ``rev`` names in this checkout's repository; exits with the
    fix when it has none (a shallow clone, or one made without tags)."""
    try:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                              cwd=CHECKOUT, capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("bench/throughput.py: git is not installed; the old engine is measured from "
                 f"the git rev {rev!r}")
    if done.returncode != 0:
        sys.exit(f"bench/throughput.py: no git rev {rev!r} in {CHECKOUT} (a shallow clone or one "
                 f"without tags?): run `git fetch --tags` (or pass --old-rev REV, or --skip 4)")
    return done.stdout.strip()


def unpack(commit: str, into: Path) -> Path:
    """The tree of ``commit`` written under ``into`` by ``git archive``: no
    worktree or checkout of the repository is touched."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=CHECKOUT,
                             capture_output=True, check=True).stdout
    tree = into / f"tree-{commit[:12]}"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def engine_campaign(engine: Engine, budget_s: float, seed: int, targets: tuple[str, ...] | None,
                    root: Path, ray: str | None = None) -> dict:
    """One generation-only campaign of ``engine``, fresh corpus and cold
    cache; the summary. It runs in a fresh interpreter (this one, this
    script) whose PYTHONPATH is the engine's tree, so each engine imports its
    own product. ``ray``: workers as actors of a Ray cluster (``"local"``:
    started there)."""
    tag = f"{engine.name}-{seed}{'-ray' if ray else ''}"
    spec = {"tree": str(engine.tree),
            "options": {"budget_s": budget_s, "seed": seed, "corpus_dir": str(root / f"corpus-{tag}"),
                        "targets": targets, "workers": 2, "cache_dir": str(root / f"cache-{tag}"),
                        "replay": False, "shrink": False, "report": False, "ray": ray,
                        **engine.policy}}
    spec_path, out_path = root / f"spec-{tag}.json", root / f"summary-{tag}.json"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, __file__, "--one-campaign", str(spec_path), str(out_path)],
                          env={**os.environ, "PYTHONPATH": str(engine.tree)})
    if done.returncode != 0:
        sys.exit(f"bench/throughput.py: the {engine.name} engine's campaign (seed {seed}, "
                 f"{engine.tree}) exited with status {done.returncode}")
    return json.loads(out_path.read_text())


def one_campaign(spec_path: Path, out_path: Path) -> None:
    """The child of ``engine_campaign``: run the campaign the spec describes
    with the product on PYTHONPATH and write its summary as JSON."""
    import fuzz
    from fuzz.engine.campaign import CampaignOptions, run_campaign

    spec = json.loads(spec_path.read_text())
    # An editable install ahead of PYTHONPATH would measure the wrong tree.
    imported = Path(fuzz.__file__).resolve()
    if not imported.is_relative_to(Path(spec["tree"]).resolve()):
        sys.exit(f"bench/throughput.py: fuzz imported from {imported}, not from {spec['tree']}")
    options = dict(spec["options"])
    options["targets"] = tuple(options["targets"]) if options["targets"] else None
    for name in ("corpus_dir", "cache_dir"):
        options[name] = Path(options[name])
    report = run_campaign(CampaignOptions(**options))
    summary = report.summary()
    summary["stage_seconds"] = dict(report.stage_seconds)
    summary["samples_per_minute"] = ratio(report.samples, report.elapsed_s) * 60
    # A sample the scheduler sent to no target was generated, not checked.
    summary["checked_per_minute"] = ratio(report.samples - report.unscheduled,
                                          report.elapsed_s) * 60
    out_path.write_text(json.dumps(summary))


def engines(budget_s: float, targets: tuple[str, ...] | None, old_rev: str, commit: str) -> None:
    """Figures 4-6: the old engine (the product at ``old_rev``, which names
    ``commit``) and today's on seeds 1-3, same budget each."""
    import statistics

    seeds = (1, 2, 3)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        old_engine = Engine("old", unpack(commit, root), OLD_POLICY)
        # Each seed on both engines: streams differ in how many samples lower
        # everywhere (the costly ones), so a ratio only means something per seed.
        old = [engine_campaign(old_engine, budget_s, seed, targets, root) for seed in seeds]
        new = [engine_campaign(TODAY, budget_s, seed, targets, root) for seed in seeds]
    for o, n in zip(old, new):
        n["ratio"] = ratio(n["checked_per_minute"], o["checked_per_minute"])
        n["generated_ratio"] = ratio(n["samples_per_minute"], o["samples_per_minute"])
    print(f"4. samples checked (run on at least one target) per minute over "
          f"{len(new[0]['targets'])} targets, {budget_s:.0f}s per campaign, old engine "
          f"({old_rev} = {commit[:9]}) vs today's on the same seed; aim >= 3x")
    for seed, o, n in zip(seeds, old, new):
        print(f"   seed {seed}: old {o['checked_per_minute']:.1f} ({o['samples']} samples), today's "
              f"{n['checked_per_minute']:.1f} ({n['samples'] - n['unscheduled']} checked of "
              f"{n['samples']} generated, {n['unscheduled']} sent to no target, "
              f"{n['confirm_runs']} re-run on every target): {n['ratio']:.2f}x checked, "
              f"{n['generated_ratio']:.2f}x generated")
    print(f"   median over seeds: {statistics.median(n['ratio'] for n in new):.2f}x checked, "
          f"{statistics.median(n['generated_ratio'] for n in new):.2f}x generated; "
          f"pooled: {ratio(sum(n['checked_per_minute'] for n in new), sum(o['checked_per_minute'] for o in old)):.2f}x checked")
    print(f"   wall seconds per budget: old {', '.join(str(round(o['elapsed_s'])) for o in old)}, "
          f"today's {', '.join(str(round(n['elapsed_s'])) for n in new)} (what is in flight at "
          f"the budget's end is still checked)")
    print(f"   stage seconds (export / import / compile / run): " + "; ".join(
        f"{name} seed {seed} " + " / ".join(f"{s['stage_seconds'].get(k, 0):.0f}"
                                             for k in ("export", "import", "compile", "run"))
        for name, runs in (("old", old), ("today's", new)) for seed, s in zip(seeds, runs)))
    found: dict[str, list[float]] = {}
    for summary in new:
        for bucket, seconds in summary["first_found_s"].items():
            found.setdefault(bucket, []).append(seconds)
    print(f"5. time to first discovery, seeds 1-3 ({budget_s:.0f}s each), per bucket: "
          "median / max over the seeds that found it")
    for bucket, times in sorted(found.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"   {bucket:45s} found by {len(times)}/3: median {statistics.median(times):6.1f}s"
              f"  max {max(times):6.1f}s")
    print(f"   buckets found per seed: old engine {', '.join(str(len(o['first_found_s'])) for o in old)}; "
          f"today's {', '.join(str(len(n['first_found_s'])) for n in new)} (same seeds and budget)")
    print(f"6. busy fraction: today's engine {statistics.median(s['busy_fraction'] for s in new):.2f}"
          f" (median of 3), old engine {statistics.median(s['busy_fraction'] for s in old):.2f}; "
          f"aim >= 0.9")
    for name, summary in [*((f"old seed {i + 1}", s) for i, s in enumerate(old)),
                          *((f"new seed {i + 1}", s) for i, s in enumerate(new))]:
        print(f"   {name}: allocation {summary['allocation']}")


def ray_against_local(budget_s: float, targets: tuple[str, ...] | None) -> None:
    """Figure 8: today's engine, seed 1, with its 2 workers as local processes
    and as actors of a 2-CPU Ray cluster started here (``--ray local``)."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        print("8. skipped: Ray is not installed (pip install 'dlrm-fuzz[ray]')")
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        local = engine_campaign(TODAY, budget_s, 1, targets, root)
        ray = engine_campaign(TODAY, budget_s, 1, targets, root, ray="local")
    print(f"8. --ray local (2-CPU cluster) vs the local pool, seed 1, {budget_s:.0f}s each: "
          f"samples checked per minute {ray['checked_per_minute']:.1f} vs "
          f"{local['checked_per_minute']:.1f} (ratio {ratio(ray['checked_per_minute'], local['checked_per_minute']):.2f}), "
          f"generated {ray['samples_per_minute']:.1f} vs {local['samples_per_minute']:.1f}; "
          f"busy fraction {ray['busy_fraction']:.2f} vs {local['busy_fraction']:.2f}; buckets "
          f"{len(ray['first_found_s'])} vs {len(local['first_found_s'])}")


def table_size_compile_seconds() -> None:
    from fuzz.targets.pipeline import Timer
    from fuzz.model.config import DLRMConfig
    from fuzz.targets.catalog import TARGETS, CompiledTarget
    from fuzz.model.sample import Batch

    target = TARGETS["iree-cpu"]
    assert isinstance(target, CompiledTarget)
    seconds: dict[tuple[str, int], float] = {}
    stages: dict[tuple[str, int], dict[str, float]] = {}
    batch = Batch(np.ones((2, 4), np.float32), (np.array([0, 1]),) * 2, (np.array([0, 9]),) * 2)
    for repeat in range(3):  # the first round warms torch.export and the imports up
        for weights in ("inline", "inputs"):
            for rows in (10, 10**6):
                config = DLRMConfig(m_spa=16, ln_emb=(rows, 10), ln_bot=(4, 16), ln_top=(19, 1),
                                    weights=weights)
                timer = Timer()
                start = time.perf_counter()
                target.compile(config, 0, batch.flat(), timer, None)
                took = time.perf_counter() - start
                if repeat and took < seconds.get((weights, rows), float("inf")):
                    seconds[(weights, rows)], stages[(weights, rows)] = took, dict(timer.seconds)
    for weights in ("inline", "inputs"):
        small, big = seconds[(weights, 10)], seconds[(weights, 10**6)]
        split = ", ".join(f"{k} {v:.2f}s" for k, v in stages[(weights, 10**6)].items())
        print(f"7. weights {weights:6s}: 10-row table {small:.2f}s, 10^6-row table {big:.2f}s "
              f"(x16 wide; {split}): ratio {big / small:.2f}"
              + ("; aim <= 1.3" if weights == "inputs" else ""))


def worker_startup_seconds() -> float:
    from fuzz.workers.pool import WorkerPool

    start = time.perf_counter()
    with WorkerPool(2):
        pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="time for the batch benchmark")
    parser.add_argument("--samples", type=int, default=4, help="samples per campaign")
    parser.add_argument("--targets", default=None, help="comma-separated (default: all available)")
    parser.add_argument("--campaign", type=float, default=180.0,
                        help="budget of each campaign in figures 4-6 (seconds)")
    parser.add_argument("--skip", default="", help="figures to skip, e.g. 1,2,3")
    parser.add_argument("--old-rev", default="old-engine",
                        help="git rev whose product is the old engine of figures 4-6 "
                             "(default: the tag old-engine; a clone without it: git fetch --tags)")
    parser.add_argument("--one-campaign", nargs=2, type=Path, metavar=("SPEC", "OUT"),
                        help=argparse.SUPPRESS)  # engine_campaign's child
    args = parser.parse_args()
    if args.one_campaign:
        one_campaign(*args.one_campaign)
        return
    targets = tuple(args.targets.split(",")) if args.targets else None
    skip = set(args.skip.split(",")) - {""}
    # A missing rev fails now, not after figure 7.
    old_commit = commit_of(args.old_rev) if "4" not in skip else ""
    if "7" not in skip:
        table_size_compile_seconds()
    if "4" not in skip:
        engines(args.campaign, targets, args.old_rev, old_commit)
    if "8" not in skip:
        ray_against_local(args.campaign, targets)
    if {"1", "2", "3"} <= skip:
        return

    raw, checked = batches_per_second(args.seconds)
    print(f"1. batches against one iree-cpu artifact: {raw:.0f}/s run only, "
          f"{checked:.0f}/s checked (run + eager f32 + eager f64 + compare); aim >= 300/s")

    startup = worker_startup_seconds()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        cold, n = campaign_seconds(root / "cache", args.samples, targets, root / "c1")
        warm, _ = campaign_seconds(root / "cache", args.samples, targets, root / "c2")
        uncached, _ = campaign_seconds(None, args.samples, targets, root / "c3")
    from fuzz.targets.catalog import TARGETS, available_targets

    names = targets or tuple(available_targets(TARGETS))
    cold_f, warm_f = cold - startup, warm - startup
    print(f"2. configs checked per minute across {len(names)} targets ({', '.join(names)}): "
          f"{ratio(n, cold_f) * 60:.1f} with a cold cache (the default: targets sharing a "
          f"lowered program reuse it), {ratio(n, uncached - startup) * 60:.1f} with "
          f"--no-cache; {n} samples, worker start-up {startup:.1f}s excluded")
    print(f"3. campaign of {n} samples: cold cache {cold_f:.1f}s, warm cache {warm_f:.1f}s "
          f"(worker start-up {startup:.1f}s excluded from both): {ratio(cold_f, warm_f):.1f}x; "
          f"aim >= 10x")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
