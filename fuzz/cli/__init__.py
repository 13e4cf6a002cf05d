"""The ``dlrm-fuzz`` command line: ``main`` (the parser, dispatch and ``run``),
``corpus`` (targets, corpus, replay, repro, matrix, report, presets),
``regress`` (bump, bisect), ``validate``, with ``options`` (argument types and
shared option groups) and ``summary`` (a campaign's report on the terminal)."""

from typing import Any

from fuzz import _moved

from fuzz.cli.main import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    """The old ``fuzz.cli`` module's other names (now ``fuzz.cli.main``)."""
    return _moved.forward(__name__, "fuzz.cli", "fuzz.cli.main", name)
