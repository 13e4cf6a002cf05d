"""The widths DLRM derives from a configuration's other fields, as plain
arithmetic: the width every table pools to (what the bottom MLP must end at)
and the width the interaction hands the top MLP (what it must start at).
Apart from ``fuzz.model.config`` so that the config's checks, the edits that
recompute widths, the strategies and the presets share one formula without
needing a config to hold the numbers.
"""

from __future__ import annotations

from typing import Any

__all__ = ["embedding_width", "interaction_width", "with_derived_widths"]


def embedding_width(m_spa: int | tuple[int, ...], qr_concat: bool) -> int:
    """The width every table's pooled output has (what ln_bot must end at)."""
    base = max(m_spa) if isinstance(m_spa, tuple) else m_spa
    return 2 * base if qr_concat else base


def interaction_width(width: int, num_tables: int, op: str, itself: bool) -> int:
    """The width the interaction hands the top MLP (what ln_top must start at)."""
    features = num_tables + 1
    if op == "cat":
        return width * features
    pairs = features * (features + 1) // 2 if itself else features * (features - 1) // 2
    return width + pairs


def with_derived_widths(values: dict[str, Any]) -> dict[str, Any]:
    """Field values with the widths DLRM derives recomputed from the others:
    ``ln_bot[-1]`` (the embedding width) and ``ln_top[0]`` (the interaction
    width); mixed widths collapse to their maximum once MD is off."""
    values = dict(values)
    if not values["md_flag"] and isinstance(values["m_spa"], tuple):
        values["m_spa"] = max(values["m_spa"])
    concat = bool(values["qr_flag"]) and values["qr_operation"] == "concat"
    width = embedding_width(values["m_spa"], concat)
    ln_emb = tuple(values["ln_emb"])
    values["ln_bot"] = (*tuple(values["ln_bot"])[:-1], width)
    values["ln_top"] = (interaction_width(width, len(ln_emb), values["arch_interaction_op"],
                                          values["arch_interaction_itself"]),
                        *tuple(values["ln_top"])[1:])
    return values
