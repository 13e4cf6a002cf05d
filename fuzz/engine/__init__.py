"""The engine that drives many samples through the targets: the
``campaign`` and its phases, the ``schedule`` (which targets a sample goes
to; its pools are in ``fuzz.workers``), ``progress``, ``interrupt`` handling and ``coverage``."""

__all__: list[str] = []
