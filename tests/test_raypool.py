"""The Ray pool on a real local Ray cluster: FAKE targets misbehave exactly as
in test_workers and give the same verdicts; an actor lost mid-job (killed,
stopped, or its whole node removed from a two-node cluster) loses no job:
each is answered with its real result by another actor, and a job no actor
survives, or a cluster with no node left, stops the run with a one-line
error; Ctrl-C gets through a wait on Ray at once; configuration mistakes are
one-line errors. Every cluster here is small (1-2 CPUs) and shut down."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'dlrm-fuzz[ray]')")

# Own pytest process (tox runs `-m ray` apart): clusters started from a
# process that has run the rest of the suite lost actors to their deadlines.
pytestmark = pytest.mark.ray

from fuzz.engine.interrupt import Interrupted, stop_signals  # noqa: E402
from fuzz.workers.raypool import (MAX_ATTEMPTS, ClusterLost, RayPool, RayUnavailable,  # noqa: E402
                          needs_gpu, runs_here)
from fuzz.targets.catalog import TARGETS, resolve_targets  # noqa: E402
from fuzz.workers.pool import HarnessError  # noqa: E402
from oracles import Verdict, classify, judge  # noqa: E402
from tests.helpers import (assert_cancel_drops_queued_jobs_only,  # noqa: E402
                           assert_followers_wait_for_their_leaders,  # noqa: E402
                           assert_freed_workers_answer_while_one_hangs, tiny_sample)  # noqa: E402
from tests.raypool_jobs import (KillsItsActor, LosesItsActorOnce, SlowJob,  # noqa: E402
                                WhereAmI)

TIMEOUT_S = 5


@pytest.fixture(scope="module", autouse=True)
def no_ray_token() -> Iterator[None]:
    """Test clusters without Ray's token authentication: their first start
    would otherwise create ~/.ray/auth_token, which turns authentication on
    for any later `ray start --head` on the machine."""
    before = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    yield
    if before is None:
        del os.environ["RAY_AUTH_MODE"]
    else:
        os.environ["RAY_AUTH_MODE"] = before


def _verdicts(results: list) -> list[Verdict]:
    return [classify(r.failure)[0] if r.failure else Verdict.PASS for r in results]


class TestLocalCluster:
    """One local 2-CPU cluster (started and shut down by the pool) for these."""

    @pytest.fixture(scope="class")
    def pool(self) -> Iterator[RayPool]:
        assert not ray.is_initialized()
        sigterm = signal.getsignal(signal.SIGTERM)
        with RayPool(2, timeout_s=TIMEOUT_S, memory_mb=1024, preload=False,
                     address="local") as workers:
            assert signal.getsignal(signal.SIGTERM) is sigterm  # the campaign's stop stays in charge
            assert ray.cluster_resources()["CPU"] == 2
            yield workers
        assert not ray.is_initialized()  # the cluster it started is gone

    def test_misbehaving_targets_give_the_local_pools_verdicts(self, pool: RayPool) -> None:
        names = ["fake-ok", "fake-segfault", "fake-ok", "fake-abort", "fake-hang", "fake-oom",
                 "fake-raise", "fake-ok"]
        sample = tiny_sample(batches=2)
        results = pool.run([(t, sample) for t in resolve_targets(names)])
        assert [r.target for r in results] == names
        assert _verdicts(results) == [Verdict.PASS, Verdict.CRASH, Verdict.PASS, Verdict.CRASH,
                                      Verdict.TIMEOUT, Verdict.CRASH, Verdict.COMPILE_ERROR,
                                      Verdict.PASS]
        segfault, hang = results[1].failure, results[4].failure
        assert segfault is not None and segfault.signal == 11 and segfault.stage == "compile"
        assert "Fatal Python error: Segmentation fault" in segfault.stderr_tail
        assert hang is not None and hang.timed_out and f"{TIMEOUT_S}s" in hang.message
        ok = results[0]
        assert ok.failure is None and all(o is not None and o.shape == (2, 1) for o in ok.outputs)
        assert all(o is not None and o.flags.writeable for o in ok.outputs)  # own memory, as locally
        # Findings, not lost actors: each actor's own worker pool replaced its worker.
        assert pool.replaced == 0 and not pool.lost and pool.slots == 2

    def test_a_hang_does_not_hold_up_other_answers(self, pool: RayPool) -> None:
        assert_freed_workers_answer_while_one_hangs(pool, hang_limit_s=TIMEOUT_S)

    def test_a_follower_waits_for_its_leader_while_other_jobs_run(self, pool: RayPool) -> None:
        assert_followers_wait_for_their_leaders(pool)

    @pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
    def test_an_actor_lost_mid_job_loses_no_job(self, pool: RayPool, tmp_path: Path,
                                                signum: int) -> None:
        """The job that took its actor down runs again on another actor and
        answers its real result; the other jobs are answered too, and a new
        actor takes the lost one's place."""
        sample = tiny_sample()
        ok = resolve_targets(["fake-ok"])[0]
        replaced, lost = pool.replaced, len(pool.lost)
        grace = pool.grace_s
        pool.grace_s = 1.0  # a stopped actor is presumed lost TIMEOUT_S + 1 s after its job began
        try:
            jobs = [SlowJob(0.5, 1), LosesItsActorOnce(ok, sample, str(tmp_path / "once"), signum),
                    SlowJob(0.5, 3), SlowJob(0.5, 4)]
            answers = pool.run(jobs)
        finally:
            pool.grace_s = grace
        assert (tmp_path / "once").exists()  # it did take its actor down
        assert answers[0] == 1 and answers[2:] == [3, 4]
        assert answers[1].target == "fake-ok" and answers[1].failure is None
        assert len(answers[1].outputs) == 1 and answers[1].outputs[0].shape == (2, 1)
        assert pool.replaced == replaced + 1 and len(pool.lost) == lost + 1
        assert "fake-ok" in pool.lost[-1]
        assert ("no answer within" in pool.lost[-1]) == (signum == signal.SIGSTOP)
        # The replacement starts and takes jobs again.
        assert pool.run([SlowJob(0, 5), SlowJob(0, 6)]) == [5, 6]
        deadline = time.monotonic() + 60
        while pool.slots < 2 and time.monotonic() < deadline:
            pool.run([SlowJob(0, 7)])
        assert pool.slots == 2

    def test_a_job_that_kills_every_actor_it_meets_is_given_up(self, pool: RayPool) -> None:
        replaced = pool.replaced
        with pytest.raises(ClusterLost, match=f"while running fake-node-killer .*; the job lost "
                           f"{MAX_ATTEMPTS} workers, giving up on it"):
            pool.run([KillsItsActor()])
        assert pool.replaced == replaced + MAX_ATTEMPTS and pool.pending == 0
        assert pool.run([SlowJob(0, 1), SlowJob(0, 2)]) == [1, 2]  # new actors took over

    def test_ctrl_c_stops_a_wait_at_once_and_the_pool_goes_on(self, pool: RayPool) -> None:
        """The campaign's stop signal, raised while the pool waits on Ray,
        comes out as itself within a moment (not wrapped by Ray, not at the
        end of the wait); the pool then answers the job it was waiting for."""
        hung = pool.submit((resolve_targets(["fake-hang"])[0], tiny_sample()))
        previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
        began = time.monotonic()
        try:
            with stop_signals(), pytest.raises(Interrupted):
                signal.setitimer(signal.ITIMER_REAL, 0.5)
                pool.completed()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert time.monotonic() - began < 2
        ((ticket, result),) = pool.completed()
        assert ticket == hung and result.failure is not None and result.failure.timed_out

    def test_cancel_drops_queued_jobs_and_lets_running_ones_answer(self, pool: RayPool) -> None:
        assert_cancel_drops_queued_jobs_only(pool)
        # Jobs that run here sit in the coordinator's own one-worker pool.
        here = [pool.submit(WhereAmI(runs_here=True)) for _ in range(3)]
        assert pool.cancel(here) == set(here[1:])
        got: dict[int, Any] = {}
        while pool.pending:
            got.update(pool.completed())
        assert list(got) == here[:1] and got[here[0]] == os.getpid()

    def test_jobs_on_this_machines_files_run_here(self, pool: RayPool) -> None:
        """A job that writes the corpus (a bug report) runs on the coordinator,
        the others on the actors, all answered through the same tickets."""
        from fuzz.reports.bugreport import BugReportJob

        assert runs_here(BugReportJob("corpus/x")) and not runs_here(WhereAmI())
        ran_here = pool.ran_here
        answers = pool.run([WhereAmI(), WhereAmI(runs_here=True), WhereAmI(),
                            WhereAmI(runs_here=True)])
        assert answers[1] == answers[3] == os.getpid()
        assert os.getpid() not in (answers[0], answers[2])
        assert pool.ran_here == ran_here + 2 and pool.pending == 0

    def test_a_gpu_target_without_gpu_workers_is_a_one_line_error(self, pool: RayPool) -> None:
        pending = pool.pending
        with pytest.raises(RayUnavailable, match="target='iree-cuda' needs a GPU but "
                           "gpu_workers=0: reserve GPU actors with --ray-gpu-workers N"):
            pool.submit((TARGETS["iree-cuda"], tiny_sample()))
        assert pool.pending == pending


def test_only_cuda_and_hip_targets_need_a_gpu() -> None:
    gpu = sorted(name for name, target in TARGETS.items() if needs_gpu(target))
    assert gpu == ["iree-cuda", "iree-cuda-dyn", "iree-hip", "iree-hip-dyn"]


def test_an_unreachable_address_is_a_one_line_error() -> None:
    assert not ray.is_initialized()
    began = time.monotonic()
    with pytest.raises(RayUnavailable, match=r"address='127.0.0.1:1': no Ray cluster reachable "
                       r"\(cannot connect to 127.0.0.1:1.*`ray start --head`.*HOST:6379`; or use --ray local") as caught:
        RayPool(1, address="127.0.0.1:1")
    assert "\n" not in str(caught.value) and time.monotonic() - began < 10
    assert not ray.is_initialized()


def test_without_ray_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RayUnavailable, match=r"Ray is not installed .*pip install 'dlrm-fuzz\[ray\]'"):
        RayPool(1, address="local")


class TestClusterOfThisProcess:
    """A 1-CPU cluster this process started: a pool uses it, and leaves it up."""

    @pytest.fixture(scope="class", autouse=True)
    def cluster(self) -> Iterator[None]:
        assert not ray.is_initialized()
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        yield
        ray.shutdown()

    def test_too_big_a_pool_for_the_cluster_is_a_one_line_error(self) -> None:
        with pytest.raises(RayUnavailable, match=r"workers=2 \+ gpu_workers=0 need 2 CPUs; the "
                           r"Ray cluster at auto has 1: add nodes or ask for fewer workers"):
            RayPool(2, preload=False)
        with pytest.raises(RayUnavailable, match=r"gpu_workers=1: the Ray cluster at auto has 0 "
                           r"GPUs; join GPU nodes with `ray start --address=HEAD:6379 --num-gpus N`"):
            RayPool(1, gpu_workers=1, preload=False)
        assert ray.is_initialized()

    def test_an_actor_that_cannot_start_says_why(self) -> None:
        with pytest.raises(HarnessError, match=r"^a Ray worker failed to start at auto: "
                           r"FileNotFoundError: .* '/proc/nope'$"):
            RayPool(1, preload=False, cache_dir=Path("/proc/nope/cache"))
        assert ray.is_initialized()

    def test_a_campaign_runs_unchanged_on_a_ray_pool(self, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """The campaign's own phases (replay, generate, triage, report) with its
        pool swapped for a RayPool: the outcomes and buckets test_campaign's
        local run gets, the corpus written here."""
        from fuzz.engine import campaign, session
        from fuzz.store import corpus

        pools: list[RayPool] = []

        def ray_pool(size: int, timeout_s: float, memory_mb: int | None,
                     **kwargs: object) -> RayPool:
            kwargs.pop("reserved", None)  # workers held for bug work: a RayPool holds none
            pools.append(RayPool(size, timeout_s, memory_mb, preload=False,
                                 **kwargs))  # type: ignore[arg-type]
            return pools[-1]

        monkeypatch.setattr(session, "WorkerPool", ray_pool)
        options = campaign.CampaignOptions(budget_s=300, seed=1, corpus_dir=tmp_path / "corpus",
                                           targets=("fake-segfault", "fake-ok", "fake-raise"),
                                           workers=1, timeout_s=12, memory_mb=2048,
                                           max_samples=2, shrink=False)
        report = campaign.run_campaign(options)
        assert len(pools) == 1 and ray.is_initialized()
        assert pools[0].ran_here == 2  # the two new buckets' report jobs ran here
        assert report.samples == 2
        assert report.outcomes[("fake-ok", "PASS")] == 2
        assert report.outcomes[("fake-segfault", "CRASH")] == 2
        assert report.outcomes[("fake-raise", "COMPILE_ERROR")] == 2
        entries, junk = corpus.load(tmp_path / "corpus")
        assert junk == [] and sorted(e.target for e in entries) == ["fake-raise", "fake-segfault"]

    @pytest.mark.pipeline
    def test_a_real_sample_passes_on_iree_cpu_through_ray(self) -> None:
        """The real toolchain in a Ray actor (default memory cap: IREE's compiler
        library alone maps more than the FAKE tests' 1 GiB)."""
        sample = tiny_sample(batches=2)
        with RayPool(1, preload=False) as pool:
            reference, eager, got = pool.run([(TARGETS[n], sample)
                                              for n in ("eager-f64", "eager", "iree-cpu")])
        assert ray.is_initialized()  # not the pool's cluster: still up
        outcome = judge(got, reference, eager)
        assert outcome.verdict is Verdict.PASS, outcome
        assert got.compiles == 1 and all(o is not None for o in got.outputs)


def test_a_node_removed_mid_run_loses_no_job() -> None:
    """Two nodes, one actor each; the worker node goes away while both run
    jobs: every job is answered, the run goes on with the head's actor, and
    the cluster (not the pool's) outlives the pool."""
    from ray.cluster_utils import Cluster

    assert not ray.is_initialized()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        with RayPool(2, timeout_s=30, memory_mb=1024, preload=False,
                     address=cluster.address) as pool:
            hosts = {a.where for a in pool._actors}
            assert len(hosts) == 2
            tickets = [pool.submit(SlowJob(1.0, i)) for i in range(8)]
            answers = dict(pool.completed())
            cluster.remove_node(node)
            while pool.pending:
                answers.update(pool.completed())
            assert sorted(answers) == tickets
            assert [answers[t] for t in tickets] == list(range(8))
            assert pool.replaced >= 1 and pool.lost and pool.slots == 1
        assert not ray.is_initialized()
        assert cluster.head_node.remaining_processes_alive()
    finally:
        cluster.shutdown()


def test_a_run_whose_last_node_is_gone_stops_with_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No node left to run the jobs on: no endless wait, but a harness error
    saying so once the replacement actor has waited its start-up limit."""
    from ray.cluster_utils import Cluster

    from fuzz.workers import raypool

    monkeypatch.setattr(raypool, "_STARTUP_TIMEOUT_S", 3.0)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        with RayPool(1, timeout_s=30, memory_mb=1024, preload=False,
                     address=cluster.address) as pool:
            tickets = [pool.submit(SlowJob(1.0, i)) for i in range(3)]
            cluster.remove_node(node)
            with pytest.raises(ClusterLost, match=r"^[0-9] CPU jobs wait, and no Ray worker could "
                               r"start for 3s: the cluster at .* lost the nodes to run them"):
                while pool.pending:
                    pool.completed()
            assert pool.pending == len(tickets) and pool.replaced == 1
    finally:
        cluster.shutdown()


def test_a_node_with_another_toolchain_is_refused() -> None:
    from fuzz.workers import raypool
    from fuzz.targets.versions import tool_versions

    pool = RayPool.__new__(RayPool)  # just the check, no cluster
    other = dict(tool_versions(), **{"iree-base-compiler": "3.12.0"})
    actor = raypool._Actor(handle=None, gpu=False, ready=object(), born=0.0)
    with pytest.raises(RayUnavailable, match=r"^Ray node gpu-7 has another toolchain \(iree-base-"
                       r"compiler 3.12.0 there, .* here\): every node needs the same dlrm-fuzz "
                       r"install$"):
        pool._greet(actor, {"host": "gpu-7", "pid": 1, "versions": other})
    pool._greet(actor, {"host": "gpu-7", "pid": 1, "versions": tool_versions()})
    assert actor.ready is None and actor.where == "gpu-7:1"

