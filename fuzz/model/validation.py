"""The one error a configuration DLRM_Net could not run raises
(``InvalidConfig``) and how its messages read: ``name=value: what it must
be``, one line naming the fix (Hypothesis ``internal/validation.py``), and
the check every list-valued field (``ln_emb``, ``ln_bot``, ``ln_top``,
per-table ``m_spa``) goes through. Apart from ``fuzz.model.config`` so that
the config module reads as the fields and their rules, not as message
plumbing.
"""

from __future__ import annotations

import numbers
from typing import Any

__all__ = ["InvalidConfig", "invalid", "int_tuple"]


class InvalidConfig(ValueError):
    """A DLRM configuration that DLRM_Net could not run; the message names the
    offending ``field=value`` and says what it must be."""


def invalid(name: str, value: Any, must: str) -> InvalidConfig:
    """The error for field ``name`` at ``value``, saying what it ``must`` be."""
    return InvalidConfig(f"{name}={value!r}: {must}")


def int_tuple(name: str, value: Any, *, min_len: int, min_value: int) -> tuple[int, ...]:
    """``value`` as a tuple of at least ``min_len`` integers, each at least
    ``min_value``, or the ``InvalidConfig`` that says which of these it is not."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        if name == "m_spa":
            raise invalid(name, value, "must be an integer, or with md_flag a list of integers")
        raise invalid(name, value, f"must be a list of at least {min_len} integers")
    items = tuple(value)
    if len(items) < min_len:
        raise invalid(name, list(items), f"must have at least {min_len} entries")
    if any(isinstance(item, bool) or not isinstance(item, numbers.Integral) for item in items):
        raise invalid(name, list(items), "must contain only integers")
    items = tuple(int(item) for item in items)
    for item in items:
        if item < min_value:
            raise invalid(name, list(items), f"every entry must be >= {min_value}")
    return items
