"""Shared test setup: every test run is seeded, and the seed is printed.

tox passes ``--hypothesis-seed=$HYPOTHESIS_SEED`` (default 0) and the example
database is off, so a CI failure replays on a laptop with the printed seed.
(``derandomize=True`` is not used: it stops ``find`` from shrinking.)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

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
