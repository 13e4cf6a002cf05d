"""What running the workers as Ray actors costs, against the local worker
pool, on this machine (never pass/fail).

The same N real samples (drawn by ``strategies.samples()`` from a fixed seed)
go through ``WorkerPool(2)`` and through ``RayPool(2, address="local")`` (a
2-CPU Ray cluster started here): every sample is run on the two references
and the given targets, as a campaign does, with two jobs kept in flight by
``submit`` / ``completed``. Printed: start-up, samples per minute (start-up
excluded) and their ratio, the CPU seconds each pool's processes spent per
sample (less sensitive than wall time to other load on a shared machine),
the round trip of a trivial job, the memory and idle CPU of each pool's
processes, and what jobs and answers weigh pickled. On a shared machine,
use ``--repeat`` (rounds alternate which pool goes first).

Usage: python bench/ray_overhead.py [--samples 6] [--seed 0] [--targets a,b,c] [--repeat 1]
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np


def feed(pool: Any, jobs: list[Any], in_flight: int) -> list[Any]:
    """Keep ``in_flight`` jobs submitted until all are answered; answers in order."""
    answers: dict[int, Any] = {}
    tickets: list[int] = []
    queue = list(jobs)
    while queue or pool.pending:
        while queue and pool.pending < in_flight:
            tickets.append(pool.submit(queue.pop(0)))
        answers.update(pool.completed())
    return [answers[t] for t in tickets]


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    family, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in family} - family
        family |= more
        grew = bool(more)
    return family - {root}


def tree_rss_mb(root: int) -> float:
    """Resident memory of ``root``'s descendants (not ``root`` itself), MiB."""
    total_kb = 0
    for pid in _descendants(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            pass
    return total_kb / 1024


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) used so far by ``root``'s descendants alive now."""
    ticks = 0
    for pid in _descendants(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


def measure(name: str, make_pool: Any, jobs: list[Any], samples: int, trivial: list[Any],
            in_flight: int, idle: float) -> dict[str, Any]:
    began = time.perf_counter()
    with make_pool() as pool:
        startup = time.perf_counter() - began
        feed(pool, trivial[:2], in_flight)  # warm: first job of each worker imports torch
        idle_rss = tree_rss_mb(os.getpid())
        cpu = tree_cpu_s(os.getpid())
        time.sleep(idle)
        idle_cpu = (tree_cpu_s(os.getpid()) - cpu) / idle
        start, cpu = time.perf_counter(), tree_cpu_s(os.getpid())
        answers = feed(pool, jobs, in_flight)
        elapsed = time.perf_counter() - start
        cpu_per_sample = (tree_cpu_s(os.getpid()) - cpu) / samples
        busy_rss = tree_rss_mb(os.getpid())
        start = time.perf_counter()
        for job in trivial:  # one at a time: the round trip of a job that does ~nothing
            pool.run([job])
        per_job = (time.perf_counter() - start) / len(trivial)
        busy_s = pool.busy_s
    failures = collections.Counter(f"{a.target}: {a.failure.error_type}" for a in answers
                                   if a.failure is not None)
    failed = f"{sum(failures.values())} jobs failed ({', '.join(sorted(failures)) or 'none'})"
    print(f"{name:>10}: start-up {startup:5.1f}s, {len(jobs)} jobs ({samples} samples) in "
          f"{elapsed:6.1f}s = {samples / elapsed * 60:5.2f} samples/min, "
          f"{cpu_per_sample:4.1f} CPU s per sample, worker busy "
          f"{busy_s:6.1f}s, {failed}; trivial job round trip "
          f"{per_job * 1000:6.1f} ms; memory of its processes {idle_rss:6.0f} MiB idle, "
          f"{busy_rss:6.0f} MiB after the run; idle CPU {idle_cpu * 100:4.1f}% of a core")
    return {"startup": startup, "elapsed": elapsed, "per_job": per_job, "answers": answers,
            "rss": busy_rss, "idle_cpu": idle_cpu, "cpu": cpu_per_sample}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default="iree-cpu,iree-vmvx,refbackend")
    parser.add_argument("--trivial", type=int, default=20, help="trivial jobs for the round trip")
    parser.add_argument("--in-flight", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds, alternating which pool goes first (a shared machine is noisy)")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds to watch an idle pool's CPU use")
    args = parser.parse_args()

    from fuzz.workers.raypool import RayPool
    from fuzz.targets.catalog import EAGER, REFERENCE, resolve_targets
    from fuzz.workers.pool import ExecuteJob, WorkerPool
    from strategies.draw import draw_samples

    targets = resolve_targets([REFERENCE, EAGER, *args.targets.split(",")], check_available=True)
    samples = draw_samples(args.samples, args.seed)
    jobs = [ExecuteJob(t, s) for s in samples for t in targets]
    # The trivial job: a FAKE target that answers like eager PyTorch (no compiler).
    fake_ok = resolve_targets(["fake-ok"])[0]
    trivial = [ExecuteJob(fake_ok, samples[0]) for _ in range(args.trivial)]

    print(f"{len(samples)} samples (seed {args.seed}) x {len(targets)} targets "
          f"({', '.join(t.name for t in targets)}), {args.in_flight} jobs in flight, no cache, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} (Ray sets 1 in a "
          f"1-CPU actor: torch runs one thread there)")
    make = {"WorkerPool": lambda: WorkerPool(2), "RayPool": lambda: RayPool(2, address="local")}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in make}
    for round_ in range(args.repeat):
        for name in (list(make) if round_ % 2 == 0 else list(make)[::-1]):
            runs[name].append(measure(name, make[name], jobs, len(samples), trivial,
                                      args.in_flight, args.idle))

    def total(name: str, key: str) -> float:
        return sum(r[key] for r in runs[name]) / len(runs[name])

    local, remote = runs["WorkerPool"][0], runs["RayPool"][0]
    same = all(_same(a, b) for a, b in zip(local["answers"], remote["answers"]))
    rate = {name: len(samples) / total(name, "elapsed") * 60 for name in make}
    print(f"mean of {args.repeat}: WorkerPool {rate['WorkerPool']:.2f} samples/min, RayPool "
          f"{rate['RayPool']:.2f}: ratio {rate['RayPool'] / rate['WorkerPool']:.2f}; start-up "
          f"{total('RayPool', 'startup') - total('WorkerPool', 'startup'):+.1f}s; round trip "
          f"{(total('RayPool', 'per_job') - total('WorkerPool', 'per_job')) * 1000:+.1f} ms per "
          f"job; CPU per sample {total('WorkerPool', 'cpu'):.1f}s -> {total('RayPool', 'cpu'):.1f}s; "
          f"memory {total('RayPool', 'rss') - total('WorkerPool', 'rss'):+.0f} MiB; "
          f"same answers: {same}")
    job_bytes = [len(pickle.dumps(j)) for j in jobs]
    answer_bytes = [len(pickle.dumps(a)) for a in remote["answers"]]
    print(f"pickled sizes: jobs {min(job_bytes)}..{max(job_bytes)} B (median "
          f"{int(np.median(job_bytes))}), answers {min(answer_bytes)}..{max(answer_bytes)} B "
          f"(median {int(np.median(answer_bytes))}; the MLIR texts are most of it)")


def _same(a: Any, b: Any) -> bool:
    """Same verdict-relevant content: outputs bit for bit, failure type."""
    if (a.failure is None) != (b.failure is None):
        return False
    if a.failure is not None:
        return bool(a.failure.error_type == b.failure.error_type)
    return all((x is None and y is None) or (x is not None and y is not None
                                             and np.array_equal(x, y, equal_nan=True))
               for x, y in zip(a.outputs, b.outputs))


if __name__ == "__main__":
    main()
