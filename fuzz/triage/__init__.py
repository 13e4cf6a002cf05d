"""From raw results to bugs: judge one sample across targets into findings
(``findings``), localize a wrong answer to an op (``localize``) or a feature
(``ablate``), shrink a failing sample (``shrink``: the loop, running
``shrink_passes`` made of ``edits``: ``config_edits`` and ``input_edits``
over ``rebuild``, ordered by ``size``) and repair around known failures
(``repair``). A new oracle rule goes into ``oracles/``; how the engine
applies it across targets goes here."""

from typing import Any

from fuzz import _moved

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    """The old ``fuzz.triage`` module's names (now ``fuzz.triage.findings``)."""
    return _moved.forward(__name__, "fuzz.triage", "fuzz.triage.findings", name)
