"""The ``dlrm-fuzz`` command line: ``main`` (run, targets, corpus, replay,
matrix, repro, ...) and ``regress`` (bump, bisect)."""

from typing import Any

from fuzz.cli.main import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    """The old ``fuzz.cli`` module's other names (now ``fuzz.cli.main``)."""
    from fuzz import _moved
    return _moved.forward(__name__, "fuzz.cli", "fuzz.cli.main", name)
