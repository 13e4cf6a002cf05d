"""A campaign's phases, one module each, in the order the campaign runs
them (``fuzz.engine.campaign`` composes them): ``replay`` re-runs every
stored case, ``generate`` fuzzes new samples until the budget is spent, and
``finish`` bounds the bug work left after it."""

__all__: list[str] = []
