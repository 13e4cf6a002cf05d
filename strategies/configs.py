"""Hypothesis strategies for DLRM configurations.

Every knob of ``DLRMConfig`` is reachable; each is drawn so that it shrinks
toward the plainest DLRM (one small table, narrow MLPs, plain tables, no
pooling weights, int64 indices, dot interaction, no sigmoid, no clamp), so a
shrunk failure names only the features that matter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from fuzz.config import DLRMConfig, embedding_width, interaction_width

__all__ = ["ConfigLimits", "dlrm_configs"]


@dataclass(frozen=True)
class ConfigLimits:
    """Upper bounds on generated sizes: small by default so a compile is cheap."""

    max_tables: int = 4
    max_rows: int = 64
    max_width: int = 8
    max_dense: int = 8
    max_hidden: int = 16
    max_hidden_layers: int = 2

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < (0 if name == "max_hidden_layers" else 1):
                raise ValueError(f"{name}={value!r}: must be a positive integer")


def _mlp_hidden(draw: Any, limits: ConfigLimits) -> list[int]:
    return draw(st.lists(st.integers(1, limits.max_hidden), max_size=limits.max_hidden_layers))


def _sigmoid_layer(draw: Any, layers: int) -> int:
    return draw(st.one_of(st.just(-1), st.integers(0, layers - 1)))


@st.composite
def _configs(draw: Any, limits: ConfigLimits) -> DLRMConfig:
    ln_emb = tuple(draw(st.lists(st.integers(1, limits.max_rows), min_size=1,
                                 max_size=limits.max_tables)))
    path = draw(st.sampled_from(["plain", "qr", "md", "quantized"]))
    knobs: dict[str, Any] = {}
    m_spa: int | tuple[int, ...] = draw(st.integers(1, limits.max_width))
    if path == "qr":
        operation = draw(st.sampled_from(["mult", "add", "concat"]))
        threshold_cap = min(ln_emb) - 1 if operation == "concat" else limits.max_rows
        knobs.update(qr_flag=True, qr_operation=operation,
                     qr_collisions=draw(st.integers(1, 8)),
                     qr_threshold=draw(st.integers(0, max(threshold_cap, 0))))
    elif path == "md":
        m_spa = tuple(draw(st.lists(st.integers(1, limits.max_width),
                                    min_size=len(ln_emb), max_size=len(ln_emb))))
        knobs.update(md_flag=True, md_threshold=draw(st.integers(0, limits.max_rows)))
    elif path == "quantized":
        bits = draw(st.sampled_from([8, 4]))
        if bits == 4:
            m_spa = 2 * draw(st.integers(1, max(limits.max_width // 2, 1)))
        knobs.update(quantize_bits=bits)
    knobs.update(
        weighted_pooling=draw(st.sampled_from([None, "fixed", "learned"])),
        index_dtype=draw(st.sampled_from(["int64", "int32"])),
        arch_interaction_op=draw(st.sampled_from(["dot", "cat"])),
        arch_interaction_itself=draw(st.booleans()),
        loss_threshold=draw(st.one_of(st.just(0.0), st.floats(1e-6, 0.2))),
    )
    # Widths follow from the choices above, exactly as DLRM_Net requires.
    width = embedding_width(m_spa, path == "qr" and knobs["qr_operation"] == "concat")
    ln_bot = (draw(st.integers(1, limits.max_dense)), *_mlp_hidden(draw, limits), width)
    ln_top = (interaction_width(width, len(ln_emb), knobs["arch_interaction_op"],
                                knobs["arch_interaction_itself"]),
              *_mlp_hidden(draw, limits), draw(st.integers(1, 2)))
    return DLRMConfig(
        m_spa=m_spa, ln_emb=ln_emb, ln_bot=ln_bot, ln_top=ln_top,
        sigmoid_bot=_sigmoid_layer(draw, len(ln_bot) - 1),
        sigmoid_top=_sigmoid_layer(draw, len(ln_top) - 1),
        **knobs)


def dlrm_configs(limits: ConfigLimits | None = None) -> st.SearchStrategy[DLRMConfig]:
    """Valid ``DLRMConfig`` objects within ``limits``, every code path reachable:
    plain / QR (mult, add, concat) / MD / 8- and 4-bit quantized tables, weighted
    pooling (fixed, learned), int32 or int64 indices, dot (with or without
    self-interaction) or cat, sigmoid anywhere, optional clamp.

    Shrinks toward one table, width 1, plain tables, no pooling weights, int64,
    dot, no sigmoid, no clamp.
    """
    if limits is None:
        limits = ConfigLimits()
    if not isinstance(limits, ConfigLimits):
        raise TypeError(f"limits={limits!r}: must be a ConfigLimits")
    return _configs(limits)
