"""Shared test setup: every test run is seeded, and the seed is printed;
every test is in a tier, and starts only what its tier allows.

tox passes ``--hypothesis-seed=$HYPOTHESIS_SEED`` (default 0) and the example
database is off, so a CI failure replays on a laptop with the printed seed.
(``derandomize=True`` is not used: it stops ``find`` from shrinking.)

Tiers (README "Tests"): a test without an ``engine``, ``pipeline``, ``gpu``,
``ray`` or ``slow`` marker gets the ``unit`` marker here, so ``-m unit``
selects it. What each marker allows is checked, not trusted
(``tests/tierguard.py``): a test that starts a process (multiprocessing or
subprocess) without ``engine``, ``pipeline``, ``gpu`` or ``ray``, or that runs
a real torch-mlir / IREE compile, in its own process or in one it spawned,
without ``pipeline`` or ``gpu``, fails and says which marker it needs.
``slow`` says how long a test takes, not what it starts: a slow test carries
one of the others too if it starts anything.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from tests import tierguard

TEST_SEED = int(os.environ.get("HYPOTHESIS_SEED", "0"))

settings.register_profile("dlrm-fuzz", database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
settings.load_profile("dlrm-fuzz")


def pytest_report_header(config: pytest.Config) -> str:
    return f"dlrm-fuzz test seed: HYPOTHESIS_SEED={TEST_SEED}"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(TEST_SEED)


@pytest.fixture(scope="session")
def toolchain_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of uv toolchain environments for the whole run, so the real
    bump, bisect and toolchain tests build each IREE release once. Skips the
    test when uv is missing (it comes with the ``test`` extra)."""
    from fuzz.regress import toolchains

    try:
        toolchains._uv_bin()
    except toolchains.ToolchainError as exc:
        pytest.skip(str(exc))
    return tmp_path_factory.mktemp("toolchains")


@pytest.fixture(scope="session", autouse=True)
def _user_corpus(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A ``dlrm-fuzz run`` without ``--corpus`` stores into the user's corpus
    (fuzz.store.seed); tests and the commands they spawn get a temporary one,
    never the home folder's."""
    os.environ["DLRM_FUZZ_CORPUS"] = str(tmp_path_factory.mktemp("user-corpus") / "corpus")


# -- tiers ---------------------------------------------------------------------
TIER_MARKERS = ("engine", "pipeline", "gpu", "ray", "slow")
# The check is on (README, Tests); DLRM_FUZZ_TIER_GUARD=0 turns it off (to
# tell a failure of the check from a failure of the test); the markers apply
# either way.
GUARD = os.environ.get("DLRM_FUZZ_TIER_GUARD", "1") != "0"
_CHILD_LOG: Path | None = None  # compile calls inside spawned processes (tierguard)


def pytest_configure(config: pytest.Config) -> None:
    """Watch what tests start, here and (via ``sitecustomize`` on
    ``PYTHONPATH``) in every interpreter they spawn."""
    global _CHILD_LOG
    if not GUARD:
        return
    tierguard.install()
    site = Path(tempfile.mkdtemp(prefix="dlrm-fuzz-tierguard-"))
    _CHILD_LOG = site / "compiles.log"
    _CHILD_LOG.touch()
    tests = str(Path(__file__).resolve().parent)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {tests!r})\n"
        "try:\n"
        "    import tierguard\n"
        "    tierguard.install_in_child()\n"
        "finally:\n"
        f"    sys.path.remove({tests!r})\n", encoding="utf-8")
    os.environ[tierguard.LOG_ENV] = str(_CHILD_LOG)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])


def pytest_unconfigure(config: pytest.Config) -> None:
    """The guard's ``sitecustomize`` folder goes with the session (a hundred
    runs left a hundred folders in /tmp)."""
    if _CHILD_LOG is not None:
        shutil.rmtree(_CHILD_LOG.parent, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``unit`` is every test no other tier claims (before ``-m`` selects)."""
    for item in items:
        if not any(item.get_closest_marker(name) for name in TIER_MARKERS):
            item.add_marker(pytest.mark.unit)


def _tier(item: pytest.Item) -> tuple[str, bool, bool]:
    """(tier named in messages, may start processes, may compile)."""
    names = {mark.name for mark in item.iter_markers()}
    compiles = bool(names & {"pipeline", "gpu"})
    processes = compiles or bool(names & {"engine", "ray"})
    tier = next((n for n in ("gpu", "pipeline", "ray", "engine") if n in names), "unit")
    return tier, processes, compiles


def _forget_cached_probes() -> None:
    """A unit test must not lean on a device probe an earlier test happened to
    run: the probe is a subprocess cached per process, so clear it and let the
    check see it whatever the order."""
    from fuzz.targets import devices

    probe = getattr(devices, "device_availability", None)
    if probe is not None and hasattr(probe, "cache_clear"):
        probe.cache_clear()


def _log_size() -> int:
    return _CHILD_LOG.stat().st_size if _CHILD_LOG is not None else 0


# Fixtures whose setup started processes or compiled: a test that uses one
# (module- or session-scoped, made for an earlier test) needs the same tier.
_FIXTURE_STARTS: dict[str, str] = {}


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object]) -> Iterator[object]:
    if not GUARD:
        return (yield)
    policy = tierguard.POLICY
    before = (policy.started, policy.compiled, _log_size())
    try:
        return (yield)
    finally:
        if policy.compiled > before[1] or _log_size() > before[2]:
            _FIXTURE_STARTS[fixturedef.argname] = "compiled (a real compile)"
        elif policy.started > before[0]:
            _FIXTURE_STARTS.setdefault(fixturedef.argname, "started processes")


def _guarded(item: pytest.Item, phase: str) -> Iterator[None]:
    if not GUARD:
        yield
        return
    tier, processes, compiles = _tier(item)
    if tier == "unit" and phase == "setup":
        _forget_cached_probes()
    tierguard.POLICY.allow(tier, processes, compiles)
    offset = _log_size()
    try:
        yield
    finally:
        found = tierguard.POLICY.report()
        for name in getattr(item, "fixturenames", ()) if phase == "setup" and not found else ():
            started = _FIXTURE_STARTS.get(name)
            if started and not (compiles if "compile" in started else processes):
                found.append(f"uses fixture {name!r}, whose setup {started}")
        tierguard.POLICY.allow("", True, True)
        if _CHILD_LOG is not None and not compiles:
            with _CHILD_LOG.open(encoding="utf-8") as log:
                log.seek(offset)
                found += sorted({f"called {line.strip()}" for line in log if line.strip()})
        if found:
            need = "pipeline" if any("compile" in what for what in found) else "engine"
            pytest.fail(f"tier check: {item.nodeid} is a {tier} test"
                        f"{' (no engine/pipeline/gpu/ray marker)' if tier == 'unit' else ''}, "
                        f"but in {phase} it {'; '.join(found)}. Mark it "
                        f"@pytest.mark.{need} (tiers: README, Tests).", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item, "call"))
