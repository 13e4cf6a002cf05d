"""The worker pool survives its workers: FAKE targets (named as such; they
only exist to test the engine) segfault, abort, hang, blow up memory or
raise, and the pool turns each into a CRASH / TIMEOUT / error result,
replaces the worker, and loses no other job's result."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.targets.catalog import resolve_targets
from fuzz.workers.pool import WorkerPool
from oracles import Verdict, classify
from tests.helpers import (assert_cancel_drops_queued_jobs_only,
                           assert_followers_wait_for_their_leaders,
                           assert_freed_workers_answer_while_one_hangs, tiny_sample)


@pytest.fixture(scope="module")
def pool() -> WorkerPool:
    with WorkerPool(2, timeout_s=10, memory_mb=1024, preload=False) as workers:
        yield workers


@pytest.mark.engine
def test_misbehaving_targets_become_outcomes(pool: WorkerPool) -> None:
    names = ["fake-ok", "fake-segfault", "fake-ok", "fake-abort", "fake-hang", "fake-oom",
             "fake-raise", "fake-ok"]
    sample = tiny_sample(batches=2)
    replaced_before = pool.replaced
    results = pool.run([(t, sample) for t in resolve_targets(names)])
    assert [r.target for r in results] == names
    verdicts = [classify(r.failure)[0] if r.failure else Verdict.PASS for r in results]
    assert verdicts == [Verdict.PASS, Verdict.CRASH, Verdict.PASS, Verdict.CRASH, Verdict.TIMEOUT,
                        Verdict.CRASH, Verdict.COMPILE_ERROR, Verdict.PASS]
    segfault, abort, hang, oom = results[1].failure, results[3].failure, results[4].failure, results[5].failure
    assert segfault is not None and segfault.signal == 11 and segfault.stage == "compile"
    assert "Fatal Python error: Segmentation fault" in segfault.stderr_tail
    assert abort is not None and abort.error_type == "SIGABRT"
    assert hang is not None and hang.timed_out and "10s" in hang.message
    assert oom is not None and oom.error_type == "MemoryError"
    for ok in (results[0], results[2], results[7]):
        assert ok.failure is None and len(ok.outputs) == 2
        assert all(out is not None and out.shape == (2, 1) for out in ok.outputs)
        assert ok.outputs[0] is not None and ok.outputs[0].dtype == np.float32
    assert pool.replaced - replaced_before == 4


@pytest.mark.engine
def test_pool_still_works_after_crashes(pool: WorkerPool) -> None:
    results = pool.run([(t, tiny_sample()) for t in resolve_targets(["fake-segfault", "fake-ok"])])
    assert results[0].failure is not None and results[1].failure is None


@pytest.mark.engine
def test_a_closed_pool_leaves_no_temporary_folder() -> None:
    import os

    with WorkerPool(1, timeout_s=10, memory_mb=1024, preload=False) as workers:
        (crashed,) = workers.run([(resolve_targets(["fake-segfault"])[0], tiny_sample())])
        assert crashed.failure is not None and crashed.failure.error_type == "SIGSEGV"
        assert os.path.isdir(workers._log_dir)
    assert not os.path.exists(workers._log_dir)


def test_pool_rejects_zero_workers() -> None:
    with pytest.raises(ValueError, match="workers=0"):
        WorkerPool(0)


@pytest.mark.engine
def test_a_freed_worker_takes_the_next_job_while_another_hangs(pool: WorkerPool) -> None:
    assert_freed_workers_answer_while_one_hangs(pool, hang_limit_s=10)


@pytest.mark.engine
def test_a_follower_waits_for_its_leader_while_other_jobs_run(pool: WorkerPool) -> None:
    assert_followers_wait_for_their_leaders(pool)


@pytest.mark.engine
def test_run_keeps_the_answers_of_jobs_it_did_not_submit(pool: WorkerPool) -> None:
    """A caller waiting in run() (localization, in the middle of a campaign)
    must not swallow the answers of jobs submitted before it."""
    sample = tiny_sample()
    (ok,) = resolve_targets(["fake-ok"])
    earlier = [pool.submit((ok, sample)) for _ in range(3)]
    (mine,) = pool.run([(ok, sample)])
    assert mine.failure is None
    got: dict[int, object] = {}
    while len(got) < 3:
        got.update(pool.completed())
    assert sorted(got) == earlier and pool.pending == 0


class _BuggyJob:
    """A job that hits a bug of ours inside the worker."""

    target_name = "buggy"

    def __call__(self, on_stage: object, cache: object) -> object:
        raise KeyError("a bug of ours")


@pytest.mark.engine
def test_a_bug_of_ours_is_an_answer_the_worker_survives(pool: WorkerPool) -> None:
    from fuzz.workers.pool import HarnessError, HarnessFault

    replaced = pool.replaced
    ticket = pool.submit(_BuggyJob())
    ((got, fault),) = pool.completed()
    assert got == ticket and isinstance(fault, HarnessFault)
    assert "KeyError: 'a bug of ours'" in fault.traceback and fault.target == "buggy"
    with pytest.raises(HarnessError, match="bug in dlrm-fuzz while running buggy"):
        pool.run([_BuggyJob()])
    fault, fine = pool.run([_BuggyJob(), (resolve_targets(["fake-ok"])[0], tiny_sample())],
                           faults=True)  # independent jobs: the fault is an answer
    assert isinstance(fault, HarnessFault) and fine.failure is None
    (ok,) = pool.run([(resolve_targets(["fake-ok"])[0], tiny_sample())])
    assert ok.failure is None and pool.replaced == replaced  # same workers, still working


class _ReservesLikeAGpuDriver:
    """Reserves 64 GiB of address space without memory behind it (what the
    CUDA driver does when IREE creates its device), then asks for 2 GiB of
    real memory: (whether the reservation worked, whether the ask was refused)."""

    target_name = "reserves"

    def __call__(self, on_stage: object, cache: object) -> tuple[bool, bool]:
        import mmap

        try:
            reserved = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                                 prot=0)  # PROT_NONE (no name for it in 3.11)
            reserved.close()
            reservation_works = True
        except OSError:
            reservation_works = False
        try:
            hog = np.ones(2 << 30, np.uint8)
            return reservation_works, bool(hog[-1] != 1)
        except MemoryError:
            return reservation_works, True


@pytest.mark.engine
def test_the_memory_cap_refuses_memory_not_address_space(pool: WorkerPool) -> None:
    """A worker's cap (1024 MiB here) refuses memory a runaway job takes, but
    not address space reserved without memory: under an address-space cap
    (RLIMIT_AS), IREE's CUDA device could not be created in any worker on an
    H200 (CUDA_ERROR_OUT_OF_MEMORY), and every CUDA job of a default campaign
    became a false RUNTIME_ERROR."""
    (answer,) = pool.run([_ReservesLikeAGpuDriver()])
    assert answer == (True, True)


@pytest.mark.engine
def test_a_replacement_worker_that_does_not_start_is_tried_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A machine loaded for minutes can make a replacement miss its start-up
    deadline: the pool kills it and starts another (one failed start costs
    nothing); only three failed starts in a row are a HarnessError."""
    import fuzz.workers.pool
    from fuzz.workers.pool import HarnessError

    ready = WorkerPool._await_ready
    refusals = {"left": 0}

    def flaky(self, worker):  # type: ignore[no-untyped-def]
        if refusals["left"]:
            refusals["left"] -= 1
            raise HarnessError("worker did not start within 300s: (simulated)")
        return ready(self, worker)

    monkeypatch.setattr(WorkerPool, "_await_ready", flaky)
    segfault, ok = resolve_targets(["fake-segfault", "fake-ok"])
    with WorkerPool(1, timeout_s=10, memory_mb=1024, preload=False) as workers:
        refusals["left"] = fuzz.workers.pool._START_ATTEMPTS - 1
        crashed, fine = workers.run([(segfault, tiny_sample()), (ok, tiny_sample())])
        assert crashed.failure is not None and fine.failure is None
        assert refusals["left"] == 0
        refusals["left"] = fuzz.workers.pool._START_ATTEMPTS
        with pytest.raises(HarnessError, match="did not start"):
            workers.run([(segfault, tiny_sample())])


def test_urgent_jobs_go_ahead_of_queued_ones_in_their_own_order() -> None:
    """``run`` (a shrink step, a localization: a caller blocked on its own
    jobs) queues them ahead of the generated samples' jobs already waiting,
    in the order it gave them; other jobs keep theirs."""
    import collections

    from fuzz.workers.pool import AnswerQueue

    queue: collections.deque[tuple[int, str]] = collections.deque()
    pool = AnswerQueue()
    pool._urgent = set()
    for ticket, urgent in ((1, False), (2, False), (3, True), (4, True), (5, False), (6, True)):
        pool._enqueue(queue, (ticket, f"job{ticket}"), urgent)
    assert [t for t, _ in queue] == [3, 4, 6, 1, 2, 5]
    pool._after = {}
    assert pool._take(queue) == (3, "job3") and 3 not in pool._urgent
    pool._enqueue(queue, (7, "job7"), True)
    assert [t for t, _ in queue] == [4, 6, 7, 1, 2, 5]


@pytest.mark.engine
def test_a_shutdown_cut_short_by_a_second_signal_still_kills_every_worker() -> None:
    """A second stop signal raised inside ``close`` (here while it tells the
    first idle worker to exit) must not leave the others alive: workers
    ignore SIGTERM, and multiprocessing's exit handler would wait for them
    forever (a campaign printed its summary and never exited)."""
    pool = WorkerPool(2)
    processes = [worker.process for worker in pool._workers]

    class InterruptedPipe:
        def send(self, message: object) -> None:
            raise KeyboardInterrupt  # the second signal, mid-shutdown

    pool._workers[0].conn = InterruptedPipe()
    with pytest.raises(KeyboardInterrupt):
        pool.close()
    for process in processes:
        process.join(timeout=10)
        assert not process.is_alive(), "a worker outlived the pool's shutdown"



@pytest.mark.engine
def test_cancel_drops_queued_jobs_and_lets_running_ones_answer(pool: WorkerPool) -> None:
    assert_cancel_drops_queued_jobs_only(pool)


@pytest.mark.engine
def test_a_reserved_worker_runs_an_urgent_job_while_the_others_compile() -> None:
    """With a worker reserved for urgent jobs (the campaign's bug work), a
    caller blocked on its own job gets it run at once, while the ordinary
    worker is busy (here: hung); the reserved worker never takes an ordinary
    job, so one queued behind the hang stays queued."""
    import time

    hang, ok = resolve_targets(["fake-hang", "fake-ok"])
    with WorkerPool(1, timeout_s=30, memory_mb=1024, preload=False, reserved=1) as workers:
        assert workers.slots == 2
        busy = workers.submit((hang, tiny_sample()))
        queued = workers.submit((ok, tiny_sample()))
        time.sleep(0.5)
        started = time.monotonic()
        (answer,) = workers.run([(ok, tiny_sample())])
        assert answer.failure is None
        assert time.monotonic() - started < 20  # not after the 30 s hang
        assert [ticket for ticket, _ in workers._queue] == [queued]
        assert workers.cancel([queued]) == {queued}
        assert busy not in {ticket for ticket, _ in workers._ready}


@pytest.mark.engine
def test_a_worker_that_answered_an_urgent_job_waits_a_moment_for_the_next() -> None:
    """A caller blocked on its own jobs (a shrink step) sends the next one
    moments after the last answer: the freed worker lingers for it instead of
    starting a queued ordinary job, so the next step does not wait behind a
    sample's compile; once the linger is over the ordinary job runs."""
    import time

    from fuzz.workers.pool import _LINGER_S

    (ok,) = resolve_targets(["fake-ok"])
    with WorkerPool(1, timeout_s=30, memory_mb=1024, preload=False) as workers:
        (first,) = workers.run([(ok, tiny_sample())])
        ordinary = workers.submit((ok, tiny_sample()))
        assert workers._workers[0].job is None and workers.free_slots == 1  # lingering
        (second,) = workers.run([(ok, tiny_sample())])
        assert first.failure is None and second.failure is None
        assert [ticket for ticket, _ in workers._queue] == [ordinary]  # still behind it
        time.sleep(_LINGER_S)
        answers = dict(workers.completed(timeout=20))
        while ordinary not in answers:
            answers.update(workers.completed(timeout=20))
        assert answers[ordinary].failure is None


def test_a_reserved_worker_takes_only_urgent_jobs() -> None:
    import collections

    from fuzz.workers.pool import AnswerQueue

    queue: collections.deque[tuple[int, str]] = collections.deque()
    pool = AnswerQueue()
    pool._urgent, pool._after = set(), {}
    pool._enqueue(queue, (1, "generated"), False)
    assert pool._take(queue, urgent_only=True) is None
    pool._enqueue(queue, (2, "shrink step"), True)
    assert pool._take(queue, urgent_only=True) == (2, "shrink step")
    pool._after = {3: 1}  # a follower: the path that looks past the head of the queue
    pool._enqueue(queue, (3, "follower step"), True)
    pool._open_tickets = lambda: {1, 3}  # type: ignore[method-assign]
    assert pool._take(queue, urgent_only=True) is None
    assert pool._take(queue) == (1, "generated")
