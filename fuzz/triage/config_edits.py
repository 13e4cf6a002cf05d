"""Edits of a sample's architecture: the moves that change its
``DLRMConfig`` and carry the inputs along: fewer tables, rows and widths,
fewer or narrower MLP layers, fewer dense features, knobs set or back to
their defaults. Each states what it changes and lets ``config_with``
recompute the widths DLRM derives, so a new knob or width rule in the config
is picked up here without code; each returns ``None`` where it does not
apply. The edits of the inputs alone are ``fuzz.triage.input_edits``.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig, config_with, knobs
from fuzz.model.sample import Batch, Sample
from fuzz.triage.rebuild import map_bags, rebuild, valid_positions

__all__ = ["MLP", "keep_tables", "drop_table", "fewer_rows", "narrow_m_spa", "narrow_table_width",
           "drop_hidden", "narrow_layer", "drop_dense_columns", "set_knob", "knob_to_default",
           "knobs_to_default"]

MLP = Literal["bot", "top"]


# -- tables ----------------------------------------------------------------
def keep_tables(sample: Sample, keep: Sequence[int]) -> Sample | None:
    """Only the tables ``keep`` (in order): their rows, widths and bags."""
    config = sample.config
    chosen = valid_positions(config.num_tables, keep)
    if not chosen or len(chosen) == config.num_tables:
        return None
    m_spa = (tuple(config.m_spa[k] for k in chosen) if isinstance(config.m_spa, tuple)
             else config.m_spa)
    new = config_with(config, ln_emb=tuple(config.ln_emb[k] for k in chosen), m_spa=m_spa)
    if new is None:
        return None
    batches = [Batch(b.dense, tuple(b.offsets[k] for k in chosen),
                     tuple(b.indices[k] for k in chosen),
                     None if b.weights is None else tuple(b.weights[k] for k in chosen))
               for b in sample.batches]
    return rebuild(sample, new, batches)


def drop_table(sample: Sample, k: int) -> Sample | None:
    """A shrink step: the sample without table ``k`` (None when that cannot be done)."""
    return keep_tables(sample, [t for t in range(sample.config.num_tables) if t != k])


def fewer_rows(sample: Sample, k: int, rows: int) -> Sample | None:
    """Table ``k`` with ``rows`` rows (fewer); indices past the end are clamped
    to the new last row, so 'hits the last row' survives the cut."""
    config = sample.config
    if not 0 <= k < config.num_tables or not 1 <= rows < config.ln_emb[k]:
        return None
    new = config_with(config, ln_emb=tuple(rows if t == k else n for t, n in enumerate(config.ln_emb)))
    if new is None:
        return None
    return map_bags(sample, lambda b, t, bags: [np.minimum(bag, rows - 1) if t == k else bag
                                                for bag in bags], new)


def narrow_m_spa(sample: Sample, width: int) -> Sample | None:
    """A sparse feature size of at most ``width`` (every table, with mixed
    dimensions); the bottom and top MLP ends follow."""
    config = sample.config
    if width < 1:
        return None
    m_spa = (tuple(min(w, width) for w in config.m_spa) if isinstance(config.m_spa, tuple)
             else min(config.m_spa, width))
    new = config_with(config, m_spa=m_spa)
    return None if new is None else rebuild(sample, new)


def narrow_table_width(sample: Sample, k: int, width: int) -> Sample | None:
    """With mixed dimensions, table ``k`` alone gets width ``width``."""
    config = sample.config
    if not isinstance(config.m_spa, tuple) or not 0 <= k < len(config.m_spa) or width < 1:
        return None
    new = config_with(config, m_spa=tuple(width if t == k else w for t, w in enumerate(config.m_spa)))
    return None if new is None else rebuild(sample, new)


# -- MLPs ------------------------------------------------------------------
def _layers(config: DLRMConfig, mlp: MLP) -> tuple[tuple[int, ...], str, int]:
    name = "ln_bot" if mlp == "bot" else "ln_top"
    sigmoid = config.sigmoid_bot if mlp == "bot" else config.sigmoid_top
    return getattr(config, name), name, sigmoid


def drop_hidden(sample: Sample, mlp: MLP, i: int) -> Sample | None:
    """Remove hidden width ``ln_<mlp>[i]`` (1 <= i < len-1): layers i-1 and i
    merge into one, so a sigmoid on layer i or later moves down by one."""
    config = sample.config
    widths, name, sigmoid = _layers(config, mlp)
    if not 1 <= i < len(widths) - 1:
        return None
    new_sigmoid = sigmoid - 1 if sigmoid >= i else sigmoid
    new = config_with(config, **{name: widths[:i] + widths[i + 1:], f"sigmoid_{mlp}": new_sigmoid})
    return None if new is None else rebuild(sample, new)


def narrow_layer(sample: Sample, mlp: MLP, i: int, width: int) -> Sample | None:
    """Set hidden width ``ln_<mlp>[i]`` (or the top MLP's output width) to a
    smaller ``width``. The widths DLRM derives are not edited here."""
    config = sample.config
    widths, name, _ = _layers(config, mlp)
    last = len(widths) if mlp == "top" else len(widths) - 1
    if not 1 <= i < last or not 1 <= width < widths[i]:
        return None
    new = config_with(config, **{name: tuple(width if j == i else w for j, w in enumerate(widths))})
    return None if new is None else rebuild(sample, new)


def drop_dense_columns(sample: Sample, columns: Sequence[int]) -> Sample | None:
    """Fewer dense features: the columns go from every batch and ``ln_bot[0]``."""
    config = sample.config
    chosen = valid_positions(config.num_dense, columns)
    if not chosen or len(chosen) == config.num_dense:
        return None
    keep = [c for c in range(config.num_dense) if c not in chosen]
    new = config_with(config, ln_bot=(len(keep), *config.ln_bot[1:]))
    if new is None:
        return None
    return rebuild(sample, new, [Batch(np.ascontiguousarray(b.dense[:, keep]), b.offsets, b.indices,
                                       b.weights) for b in sample.batches])


# -- knobs -----------------------------------------------------------------
def set_knob(sample: Sample, name: str, value: Any) -> Sample | None:
    """One config knob set to ``value`` (index arrays follow ``index_dtype``)."""
    if name not in knobs():
        raise ValueError(f"name={name!r}: not a DLRMConfig knob; knobs are {sorted(knobs())}")
    new = config_with(sample.config, **{name: value})
    if new is None or getattr(new, name) != value:  # overruled: e.g. QR concat's threshold
        return None
    return rebuild(sample, new)


def knob_to_default(sample: Sample, name: str) -> Sample | None:
    """A shrink step: one config knob back to its default, so the case reads simpler."""
    return set_knob(sample, name, knobs()[name])


def knobs_to_default(sample: Sample, names: Sequence[str]) -> Sample | None:
    """Several knobs back to their defaults at once (delta debugging over the
    knob set: half the knobs in one step instead of one step each)."""
    defaults = knobs()
    unknown = [name for name in names if name not in defaults]
    if unknown:
        raise ValueError(f"name={unknown[0]!r}: not a DLRMConfig knob; knobs are {sorted(defaults)}")
    if not names:
        return None
    new = config_with(sample.config, **{name: defaults[name] for name in names})
    if new is None or any(getattr(new, name) != defaults[name] for name in names):
        return None
    return rebuild(sample, new)
