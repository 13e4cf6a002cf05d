"""Upstream's own DLRM configurations, declared in one visible table, for
``dlrm-fuzz run --preset NAME [--rows-scale F]``.

Each preset is what facebookresearch/dlrm (HEAD 090956e) builds for one of
its documented runs, read from its sources:

- ``readme``: the README's sample run, ``python dlrm_s_pytorch.py
  --mini-batch-size=2 --data-size=6``, i.e. ``dlrm_s_pytorch.py``'s argument
  defaults (``--arch-sparse-feature-size=2``, ``--arch-embedding-size=4-3-2``,
  ``--arch-mlp-bot=4-3-2``, ``--arch-mlp-top=4-2-1``, ``dot`` interaction
  without itself); the README's debug output shows the same model
  (top MLP ``[8 4 2 1]``). Its random-data loader passes per-table index
  lists (``input_layout=lists``).
- ``kaggle``: ``bench/dlrm_s_criteo_kaggle.sh``: ``--arch-sparse-feature-size=16
  --arch-mlp-bot=13-512-256-64-16 --arch-mlp-top=512-256-1``, with the 26
  table sizes the Criteo Kaggle data gives (``tools/visualize.py`` lists them
  for this script: ``ln_top = [367, 512, 256, 1]``).
- ``terabyte``: ``bench/dlrm_s_criteo_terabyte.sh``: ``--arch-sparse-feature-size=64
  --arch-mlp-bot=13-512-256-64 --arch-mlp-top=512-512-256-1
  --max-ind-range=10000000``, with the 26 table sizes ``tools/visualize.py``
  lists for that ``--max-ind-range`` (``ln_top = [415, 512, 512, 256, 1]``).

Upstream prepends the interaction width to ``--arch-mlp-top``
(``arch_mlp_top_adjusted``) and builds ``DLRM_Net`` with ``sigmoid_bot=-1``
and ``sigmoid_top=len(ln_top) - 2`` (a sigmoid on the last top layer): both
are kept. The Criteo loader stacks offsets and indices into 2-D tensors
(``collate_wrapper_criteo_offset``): ``input_layout=stacked``.

The Criteo tables (up to 10^7 rows) do not fit a small machine's worker as
inline constants: ``--rows-scale F`` multiplies every table's row count by F
(rounded half up, at least one row), e.g. 1e-3 for Kaggle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fuzz.model.config import DLRMConfig, InputLayout, config_with, interaction_width
from fuzz.model.focus import FocusError

__all__ = ["Preset", "PRESETS", "preset_config", "scale_rows"]


@dataclass(frozen=True)
class Preset:
    """One upstream configuration: where it comes from and its arguments as
    upstream's command line spells them (``arch_mlp_top`` without the
    interaction width upstream prepends)."""

    source: str
    m_spa: int
    ln_emb: tuple[int, ...]
    arch_mlp_bot: tuple[int, ...]
    arch_mlp_top: tuple[int, ...]
    input_layout: InputLayout
    mini_batch_size: int

    def config(self) -> DLRMConfig:
        """The ``DLRMConfig`` upstream's ``dlrm_s_pytorch.py`` builds from these arguments."""
        ln_top = (interaction_width(self.m_spa, len(self.ln_emb), "dot", False),
                  *self.arch_mlp_top)
        return DLRMConfig(m_spa=self.m_spa, ln_emb=self.ln_emb, ln_bot=self.arch_mlp_bot,
                          ln_top=ln_top, arch_interaction_op="dot",
                          arch_interaction_itself=False, sigmoid_bot=-1,
                          sigmoid_top=len(ln_top) - 2, input_layout=self.input_layout)


PRESETS: dict[str, Preset] = {
    "readme": Preset(
        source="facebookresearch/dlrm README.md sample run (dlrm_s_pytorch.py defaults)",
        m_spa=2, ln_emb=(4, 3, 2), arch_mlp_bot=(4, 3, 2), arch_mlp_top=(4, 2, 1),
        input_layout="lists", mini_batch_size=2),
    "kaggle": Preset(
        source="facebookresearch/dlrm bench/dlrm_s_criteo_kaggle.sh; table sizes "
               "tools/visualize.py (Criteo Kaggle)",
        m_spa=16,
        ln_emb=(1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593,
                3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105,
                142572),
        arch_mlp_bot=(13, 512, 256, 64, 16), arch_mlp_top=(512, 256, 1),
        input_layout="stacked", mini_batch_size=128),
    "terabyte": Preset(
        source="facebookresearch/dlrm bench/dlrm_s_criteo_terabyte.sh (--max-ind-range="
               "10000000); table sizes tools/visualize.py (Criteo Terabyte)",
        m_spa=64,
        ln_emb=(9980333, 36084, 17217, 7378, 20134, 3, 7112, 1442, 61, 9758201, 1333352,
                313829, 10, 2208, 11156, 122, 4, 970, 14, 9994222, 7267859, 9946608, 415421,
                12420, 101, 36),
        arch_mlp_bot=(13, 512, 256, 64), arch_mlp_top=(512, 512, 256, 1),
        input_layout="stacked", mini_batch_size=2048),
}
"""The presets, by ``--preset`` name."""


def scale_rows(config: DLRMConfig, factor: float) -> DLRMConfig:
    """``config`` with every table's rows times ``factor``, rounded half up,
    at least 1 (a padding row or QR-concat threshold the cut tables no longer
    hold makes it a ``FocusError``)."""
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
        raise FocusError(f"--rows-scale {factor!r}: must be a number > 0 (e.g. 1e-3)")
    rows = tuple(max(1, math.floor(n * factor + 0.5)) for n in config.ln_emb)
    scaled = config_with(config, ln_emb=rows)
    if scaled is None or scaled.ln_emb != rows:
        raise FocusError(f"--rows-scale {factor:g}: the tables {list(rows)} cannot hold this "
                         f"config (a padding row or QR threshold past them): use a larger factor")
    return scaled


def preset_config(name: str, rows_scale: float = 1.0) -> DLRMConfig:
    """The preset ``name``'s config, its tables scaled by ``rows_scale``."""
    if name not in PRESETS:
        raise FocusError(f"--preset {name}: unknown; choose from {', '.join(PRESETS)} "
                         f"(`dlrm-fuzz presets` lists them)")
    config = PRESETS[name].config()
    return config if rows_scale == 1.0 else scale_rows(config, rows_scale)
