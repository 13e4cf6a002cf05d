"""Hypothesis strategies for DLRM configurations.

Every knob of ``DLRMConfig`` is reachable; each is drawn so that it shrinks
toward the plainest DLRM (one small table, narrow MLPs, plain tables, no
pooling weights, int64 indices, dot interaction, no sigmoid, no clamp,
float32, no MLP quantization, sum pooling, per-table input lists), so a
shrunk failure names only the features that matter.

Sizes come in shape classes (``SHAPE_CLASSES``): ``tiny`` (what a compile
costs least for, most samples), ``medium`` (tables up to 10^4 rows, widths up
to 64, bags up to 64, batches up to 128, up to 8 tables) and ``large`` (a QR
table of 2^24 rows or more, indexed at and beyond 2^24, where upstream's
float32 quotient stops being exact). ``shape_classes()`` draws one, tiny
preferred, shrinking to tiny.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from fuzz.model.config import (KNOBS, DLRMConfig, config_with, embedding_width,
                               interaction_width)
from fuzz.model.shapes import SHAPE_CLASSES, ConfigLimits

__all__ = ["ConfigLimits", "dlrm_configs", "SHAPE_CLASSES", "shape_classes"]


def _choices(name: str) -> tuple[Any, ...]:
    """Knob ``name``'s values, default first, as ``DLRMConfig`` declares them:
    a value added to a knob is drawn without an edit here."""
    return KNOBS[name].choices


# Weights of the classes in generation, as slots of an integer draw that
# shrinks to slot 0 (tiny): 16 of 20 tiny, 3 medium, 1 large.
_CLASS_SLOTS = ("tiny",) * 16 + ("medium",) * 3 + ("large",)


def shape_classes() -> st.SearchStrategy[str]:
    """A shape class name: tiny 80 %, medium 15 %, large 5 %; shrinks to tiny."""
    return st.integers(0, len(_CLASS_SLOTS) - 1).map(lambda i: _CLASS_SLOTS[i])


def _mostly(default: Any, *others: Any) -> st.SearchStrategy[Any]:
    """``default`` half the time, else one of ``others``; shrinks to ``default``.
    For the embedding-bag variants today's lowering declines or gets wrong:
    drawn often enough to stay covered, not so often that most compiles stop
    at a known failure."""
    return st.integers(0, 2 * len(others) - 1).map(
        lambda i: default if i < len(others) else others[i - len(others)])


def _rare(value: Any, default: Any) -> st.SearchStrategy[Any]:
    """``default`` 3 times in 4, else ``value``; shrinks to ``default``. Not
    rarer: after the knobs it conflicts with have their say, a rarer value
    would be missing from most 40-sample (10-minute, 2-core) campaigns."""
    return st.integers(0, 3).map(lambda i: value if i == 3 else default)


def _mlp_hidden(draw: Any, limits: ConfigLimits) -> list[int]:
    return draw(st.lists(st.integers(1, limits.max_hidden), max_size=limits.max_hidden_layers))


def _sigmoid_layer(draw: Any, layers: int) -> int:
    return draw(st.one_of(st.just(-1), st.integers(0, layers - 1)))


@st.composite
def _configs(draw: Any, limits: ConfigLimits) -> DLRMConfig:
    ln_emb = tuple(draw(st.lists(st.integers(1, limits.max_rows), min_size=1,
                                 max_size=limits.max_tables)))
    huge = limits.huge_rows > 0
    path = "qr" if huge else draw(st.sampled_from(["plain", "qr", "md", "quantized"]))
    knobs: dict[str, Any] = {}
    m_spa: int | tuple[int, ...] = draw(st.integers(1, limits.max_width))
    if path == "qr":
        operation = draw(st.sampled_from(_choices("qr_operation")))
        if huge:
            # A QR table past 2^24 rows (every table, with concat), with
            # thousands of collisions so both halves stay small to compile.
            count = len(ln_emb) if operation == "concat" else 1
            big = draw(st.lists(st.integers(2**24, limits.huge_rows), min_size=count,
                                max_size=count))
            ln_emb = (*big, *ln_emb[count:])
            collisions = draw(st.integers(2**11, 2**14))
            threshold = draw(st.integers(max(max(ln_emb[count:], default=0), 0), 2**24 - 1))
        else:
            collisions = draw(st.integers(1, 8))
            threshold_cap = min(ln_emb) - 1 if operation == "concat" else limits.max_rows
            threshold = draw(st.integers(0, max(threshold_cap, 0)))
        knobs.update(qr_flag=True, qr_operation=operation, qr_collisions=collisions,
                     qr_threshold=threshold)
    elif path == "md":
        m_spa = tuple(draw(st.lists(st.integers(1, limits.max_width),
                                    min_size=len(ln_emb), max_size=len(ln_emb))))
        knobs.update(md_flag=True, md_threshold=draw(st.integers(0, limits.max_rows)))
    elif path == "quantized":
        bits = draw(st.sampled_from(_choices("quantize_bits")[1:]))
        if bits == 4:
            m_spa = 2 * draw(st.integers(1, max(limits.max_width // 2, 1)))
        knobs.update(quantize_bits=bits)
    # The knobs beyond DLRM_Net's constructor: all drawn, always in this order
    # (so shrinking one never shifts the draws of the others), then the ones
    # the choices above cannot run with fall back to their defaults (see
    # DLRMConfig's checks): constructive, nothing is rejected.
    layout = draw(st.sampled_from(_choices("input_layout")))
    pooling = draw(_mostly(*_choices("pooling")))
    weighted = draw(st.sampled_from(_choices("weighted_pooling")))
    weights_in = draw(_rare(True, False))
    last = draw(_mostly(False, True))
    # Plain tables only (a quarter of the paths): half of those get a padding row.
    padding = draw(st.none()) if not draw(_mostly(False, True)) \
        else draw(st.integers(0, limits.max_rows - 1))
    dtype = draw(st.sampled_from(_choices("dtype")))
    # Upstream's MLP quantization never gets past torch.export today: rare.
    no_mlp_quantization, *quantized_mlps = _choices("quantize_mlp")
    quantize_mlp = draw(st.sampled_from(quantized_mlps)) if draw(_rare(True, False)) \
        else no_mlp_quantization
    if path not in ("plain", "qr"):
        pooling = "sum"
    if layout == "fixed":
        weighted, last = None, False
    if pooling != "sum":
        weighted, weights_in = None, False
    if weights_in:  # per-sample weights given as an input replace the model's own
        weighted = None
    if huge:  # a pooling weight per row: 2^24+ floats per table in every model copy
        weighted = None  # (the float64 reference's ran out of a worker's memory)
    if path == "quantized":
        dtype = "float32"
    if quantize_mlp != "none":  # upstream quantizes float32 MLPs
        dtype = "float32"
    knobs.update(
        input_layout=layout,
        pooling=pooling,
        weighted_pooling=weighted,
        per_sample_weights=weights_in,
        include_last_offset=last,
        padding_idx=padding % min(ln_emb) if padding is not None and path == "plain" else None,
        dtype=dtype,
        quantize_mlp=quantize_mlp,
        index_dtype=draw(st.sampled_from(_choices("index_dtype"))),
        arch_interaction_op=draw(st.sampled_from(_choices("arch_interaction_op"))),
        arch_interaction_itself=draw(st.booleans()),
        loss_threshold=draw(st.one_of(st.just(0.0), st.floats(1e-6, 0.2))),
    )
    # Widths follow from the choices above, exactly as DLRM_Net requires.
    width = embedding_width(m_spa, path == "qr" and knobs["qr_operation"] == "concat")
    ln_bot = (draw(st.integers(1, limits.max_dense)), *_mlp_hidden(draw, limits), width)
    ln_top = (interaction_width(width, len(ln_emb), knobs["arch_interaction_op"],
                                knobs["arch_interaction_itself"]),
              *_mlp_hidden(draw, limits), draw(st.integers(1, 2)))
    sigmoid_bot = _sigmoid_layer(draw, len(ln_bot) - 1)
    sigmoid_top = _sigmoid_layer(draw, len(ln_top) - 1)
    # Weights as program inputs 3 times in 4 (one compile serves every weight
    # draw); inline constants, a code path of their own, the rest and the
    # shrink target. (Inputs as the shrink target made Hypothesis' shrinking
    # much weaker: the weight draws that come with inputs add choices, and a
    # float16 failure no longer shrank to one table. Hypothesis' first draws
    # favour the shrink target, so a campaign's first samples lean inline.)
    # Drawn last of the knobs drawn here, so it shifts no other draw.
    inline, *as_inputs = _choices("weights")
    weights = draw(st.integers(0, 3).map(
        lambda i: inline if i == 0 else as_inputs[i % len(as_inputs)]))
    chosen: dict[str, Any] = dict(
        m_spa=m_spa, ln_emb=ln_emb, ln_bot=ln_bot, ln_top=ln_top,
        sigmoid_bot=sigmoid_bot, sigmoid_top=sigmoid_top, weights=weights, **knobs)
    return _the_rest(draw, DLRMConfig(**chosen), set(chosen))


def _the_rest(draw: Any, config: DLRMConfig, drawn: set[str]) -> DLRMConfig:
    """``config`` with every choice knob that neither the draws above nor a
    table path they skipped decided (a knob declared since) drawn from its
    declared values, in field order, after every other draw (so it shifts
    none), and left at its default where the config cannot run the value.
    Today every knob is drawn above: this draws nothing."""
    for declared in KNOBS.values():
        if declared.name in drawn or declared.path is not None or declared.values is None:
            continue
        value = draw(st.sampled_from(declared.values))
        config = config_with(config, **{declared.name: value}) or config
    return config


def dlrm_configs(limits: ConfigLimits | None = None) -> st.SearchStrategy[DLRMConfig]:
    """Valid ``DLRMConfig`` objects within ``limits``, every code path reachable:
    plain / QR (mult, add, concat) / MD / 8- and 4-bit quantized tables, weighted
    pooling (fixed, learned), int32 or int64 indices, dot (with or without
    self-interaction) or cat, sigmoid anywhere, optional clamp; float16 and
    bfloat16 models, qint8/float16 MLP quantization (rare), mean/max pooling,
    B+1 offsets, a padding row, per-sample weights as an input, and the
    stacked and fixed-length input layouts.

    Shrinks toward one table, width 1, plain tables, no pooling weights, int64,
    dot, no sigmoid, no clamp, and every new knob at its default (weights
    inline).
    """
    if limits is None:
        limits = ConfigLimits()
    if not isinstance(limits, ConfigLimits):
        raise TypeError(f"limits={limits!r}: must be a ConfigLimits")
    return _configs(limits)
