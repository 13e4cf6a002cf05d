"""Running samples on targets so that nothing a compiler does takes the
fuzzer down: the pool interface and job types (``interface``), the local pool
of persistent worker processes (``pool``), what
a worker does with one job (``execute``) and the same pool as Ray actors
(``raypool``: dispatch, over ``rayactor``: one actor and which jobs go to
which, and ``raycluster``: connecting to the cluster). Triage and the engine use a pool; a new way to run jobs
(another cluster) goes here."""

from typing import Any

from fuzz import _moved

from fuzz.workers.pool import HarnessError, HarnessFault, WorkerPool

__all__ = ["WorkerPool", "HarnessError", "HarnessFault"]


def __getattr__(name: str) -> Any:
    """The old ``fuzz.workers`` module's other names (now ``fuzz.workers.pool``)."""
    return _moved.forward(__name__, "fuzz.workers", "fuzz.workers.pool", name)
