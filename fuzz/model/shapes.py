"""The shape classes: size limits of a tiny, medium or large DLRM.

Declared here, below the strategies that draw them and the focus that
classes samples by them (``fuzz.model.focus``), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConfigLimits", "SHAPE_CLASSES"]


@dataclass(frozen=True)
class ConfigLimits:
    """Upper bounds on generated sizes: small by default so a compile is cheap.
    ``max_bag``/``max_batch`` bound the inputs drawn for such a config;
    ``huge_rows`` > 0 makes the first table a QR table of 2^24 to ``huge_rows``
    rows (the large shape class)."""

    max_tables: int = 4
    max_rows: int = 64
    max_width: int = 8
    max_dense: int = 8
    max_hidden: int = 16
    max_hidden_layers: int = 2
    max_bag: int = 6
    max_batch: int = 8
    huge_rows: int = 0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            low = 0 if name in ("max_hidden_layers", "huge_rows") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}={value!r}: must be a positive integer")
        if self.huge_rows and self.huge_rows < 2**24:
            raise ValueError(f"huge_rows={self.huge_rows}: must be 0 (none) or >= 2**24")


SHAPE_CLASSES: dict[str, ConfigLimits] = {
    "tiny": ConfigLimits(),
    "medium": ConfigLimits(max_tables=8, max_rows=10_000, max_width=64, max_dense=32,
                           max_hidden=64, max_hidden_layers=2, max_bag=64, max_batch=128),
    "large": ConfigLimits(max_tables=3, max_rows=64, max_width=8, max_dense=8, max_hidden=16,
                          max_hidden_layers=1, max_bag=6, max_batch=8, huge_rows=2**25 + 2**20),
}
"""Shape classes, declared in one visible table."""
