"""The engine that drives many samples through the targets: the
``campaign`` and its ``phases``, the ``session`` every road to a verdict
shares (pool, dispatch, judging; replay, the matrix and repro use it too),
``filing`` a judged sample, the ``schedule`` (which targets a sample goes to;
its pools are in ``fuzz.workers``), ``progress``, ``interrupt`` handling and
``coverage``."""

__all__: list[str] = []
