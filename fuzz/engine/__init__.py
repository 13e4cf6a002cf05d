"""The engine that drives many samples through the targets: the
``campaign`` and its phases, the ``schedule`` (which targets a sample goes
to), the worker pool (``workers``, ``execute``) and the Ray pool
(``raypool``), ``progress``, ``interrupt`` handling and ``coverage``."""

__all__: list[str] = []
