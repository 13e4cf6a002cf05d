"""Small hand-made configs and samples shared by the tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.model.sample import Batch, Sample

if TYPE_CHECKING:
    from fuzz.engine.campaign import Campaign
    from fuzz.triage.findings import Finding


def tiny_config(**overrides: Any) -> DLRMConfig:
    """Three tables of width 4, dot interaction; overrides adjust any field."""
    fields: dict[str, Any] = dict(m_spa=4, ln_emb=(10, 20, 30), ln_bot=(3, 4), ln_top=(10, 1))
    fields.update(overrides)
    return DLRMConfig(**fields)


def linalg_of(config: DLRMConfig, seed: int, batch: Batch) -> str:
    """The model's linalg-on-tensors program exported on ``batch``: exactly what
    the linalg targets compile (no cache)."""
    from fuzz.targets.pipeline import Timer
    from fuzz.targets.catalog import TARGETS, CompiledTarget

    target = TARGETS["refbackend"]
    assert isinstance(target, CompiledTarget)
    return target.lowered(config, seed, batch.flat(), Timer(), None)


def file_as_generated(campaign: Campaign, sample: Sample) -> list[Finding]:
    """``sample`` on every target of ``campaign``, checked now and filed as a
    generated sample is (its session's pool must run)."""
    flight = campaign.session.submit(sample, campaign.targets, None)
    return campaign.filing.file(campaign.session.answered(flight))


def tiny_sample(config: DLRMConfig | None = None, seed: int = 7, batches: int = 1) -> Sample:
    """Two examples per batch; table 0 has an empty bag, every table hits its last row."""
    config = config or tiny_config()
    dtype = np.dtype(config.index_dtype)
    rng = np.random.default_rng(seed)
    made = []
    for _ in range(batches):
        dense = rng.standard_normal((2, config.num_dense)).astype(np.float32)
        offsets = tuple(np.array([0, 0 if k == 0 else 1], dtype) for k in range(config.num_tables))
        indices = tuple(np.array([0, rows - 1, rows - 1], dtype) for rows in config.ln_emb)
        made.append(Batch(dense, offsets, indices))
    return Sample(config, seed, tuple(made))


def varied_sample(config: DLRMConfig | None = None, seed: int = 11) -> Sample:
    """Three batches: two of one shape, then one with a new batch size and new
    index counts (only shape-polymorphic targets check the third)."""
    config = config or tiny_config()
    dtype = np.dtype(config.index_dtype)
    rng = np.random.default_rng(seed)
    made = list(tiny_sample(config, seed, batches=2).batches)
    batch, counts = 5, [7, 0, 12][:config.num_tables]
    counts += [3] * (config.num_tables - len(counts))
    offsets = tuple(np.concatenate([[0], np.sort(rng.integers(0, n + 1, batch - 1))]).astype(dtype)
                    for n in counts)
    indices = tuple(rng.integers(0, rows, n).astype(dtype) for rows, n in zip(config.ln_emb, counts))
    made.append(Batch(rng.standard_normal((batch, config.num_dense)).astype(np.float32),
                      offsets, indices))
    return Sample(config, seed, tuple(made))


def assert_freed_workers_answer_while_one_hangs(pool: Any, hang_limit_s: float) -> None:
    """No barrier, for any pool (``fuzz.workers.pool.AnswerQueue``): with one
    worker stuck on a hang, the others work through the queue, each answer
    comes back as soon as it is ready, and the hang's seconds count as busy."""
    from fuzz.targets.catalog import resolve_targets

    sample = tiny_sample()
    hang, ok = resolve_targets(["fake-hang", "fake-ok"])
    busy_before = pool.busy_s
    hung = pool.submit((hang, sample))
    quick = [pool.submit((ok, sample)) for _ in range(3)]
    assert pool.pending == 4 and pool.slots == 2
    answered: list[int] = []
    while len(answered) < 3:
        for ticket, result in pool.completed():
            assert ticket in quick and result.failure is None  # the hang is not done yet
            answered.append(ticket)
    assert sorted(answered) == quick and pool.pending == 1
    ((ticket, result),) = pool.completed()
    assert ticket == hung and result.failure is not None and result.failure.timed_out
    assert pool.completed(timeout=0.1) == [] and pool.pending == 0
    assert pool.busy_s - busy_before >= hang_limit_s


def assert_cancel_drops_queued_jobs_only(pool: Any) -> None:
    """``cancel``, for any pool: at the end of a budget the campaign drops
    what no worker has started; the dropped tickets never answer, the
    running ones still do, and a follower of a dropped job is dropped too."""
    from fuzz.targets.catalog import resolve_targets

    (ok,) = resolve_targets(["fake-ok"])
    assert pool.slots == 2
    tickets = [pool.submit((ok, tiny_sample())) for _ in range(5)]
    tickets.append(pool.submit((ok, tiny_sample()), after=tickets[-1]))
    assert pool.cancel(tickets) == set(tickets[2:])  # the first two had started
    got: dict[int, Any] = {}
    while pool.pending:
        got.update(pool.completed())
    assert sorted(got) == tickets[:2]
    assert all(getattr(answer, "failure", "?") is None for answer in got.values())
    assert pool.cancel(tickets) == set() and pool.waiting == 0


def assert_followers_wait_for_their_leaders(pool: Any) -> None:
    """``submit(job, after=ticket)``, for any pool: a follower never starts
    before its leader's answer is in, while a job that waits for nothing
    takes the free worker at once; ``runnable`` leaves waiting jobs out (the
    campaign feeds the pool by it); a prerequisite already answered (or
    unknown) holds nothing up."""
    from tests.raypool_jobs import StampedJob

    assert pool.slots == 2
    leader = pool.submit(StampedJob(1.5))
    follower = pool.submit(StampedJob(0.1), after=leader)
    second = pool.submit(StampedJob(0.1), after=follower)
    free = pool.submit(StampedJob(0.1))
    assert pool.pending == 4 and pool.waiting == 2 and pool.runnable == 2
    got: dict[int, Any] = {}
    while len(got) < 4:
        got.update(pool.completed())
    assert got[follower][0] >= got[leader][1] and got[second][0] >= got[follower][1]
    assert got[free][1] <= got[leader][1]  # the other worker did not wait with the follower
    assert pool.pending == pool.waiting == pool.runnable == 0
    late = pool.submit(StampedJob(0.1), after=leader)  # answered long ago
    unknown = pool.submit(StampedJob(0.1), after=10 ** 6)
    assert pool.waiting == 0
    done: dict[int, Any] = {}
    while len(done) < 2:
        done.update(pool.completed())
    assert sorted(done) == [late, unknown]
