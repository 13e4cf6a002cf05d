"""The unit of fuzzing: a DLRM configuration, the seed its weights come from,
and the input batches to check against one compiled artifact.

Inputs are kept as numpy arrays (not torch tensors) so that the campaign
process, the corpus and the worker protocol never need torch, and so that a
sample saves to ``.npz`` and loads back with ``allow_pickle=False``.
Sparse inputs are jagged: every table has its own offsets and indices, and
tables may see different numbers of indices in the same batch.

A batch is stored in one canonical form whatever the config's input layout
(per table: B bag starts, the flat indices, and per-sample weights when the
config takes them); ``Batch.flat()`` renders it in the layout the model is
exported with (per-table lists; offsets and indices stacked into 2-D tensors;
per-table ``[B, L]`` indices without offsets; B+1 offsets with
``include_last_offset``). So the shrinker's edits, the ``.npz`` files and the
worker protocol handle every layout alike, and an ``inputs.npz`` written
before layouts existed loads unchanged.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.model.config import INPUT_LAYOUTS, KNOBS, DLRMConfig

__all__ = ["Batch", "Sample", "InvalidSample", "qr_quotient", "top_index"]

# From here on float32 cannot hold every index: upstream's QR quotient may round.
_QR_EXACT = 2**24


def qr_quotient(indices: np.ndarray, collisions: int) -> np.ndarray:
    """Upstream's QR quotient in numpy: int / int true division in torch's
    default float32, then truncation. From 2**24 on it can differ from
    ``indices // collisions`` (and, near a table's end, leave the table)."""
    return (indices.astype(np.float32) / np.float32(collisions)).astype(np.int64)


def top_index(config: DLRMConfig, k: int) -> int:
    """The last index table ``k`` accepts: its last row, or for a QR table the
    last row upstream's float32 quotient keeps inside the quotient table."""
    rows = config.ln_emb[k]
    if config.table_kind(k) != "qr" or rows <= _QR_EXACT:
        return rows - 1
    q_rows = -(-rows // config.qr_collisions)
    top = rows - 1
    while int(qr_quotient(np.array([top]), config.qr_collisions)[0]) >= q_rows:
        top -= 1
    return top


class InvalidSample(ValueError):
    """Inputs that DLRM_Net itself would reject (offsets out of order, an index
    past its table): never handed to a compiler, since any verdict would be noise."""


@dataclass(frozen=True, eq=False)
class Batch:
    """One forward call: dense features (B x num_dense float32) and, per table,
    bag offsets (B bag starts, first 0), a flat index list and, with
    ``per_sample_weights``, one float32 weight per index. ``layout`` and
    ``last_offset`` say how ``flat()`` hands them to the model (the config's
    ``input_layout`` and ``include_last_offset``; ``for_config`` sets them)."""

    dense: np.ndarray
    offsets: tuple[np.ndarray, ...]
    indices: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...] | None = None
    layout: str = "lists"
    last_offset: bool = False

    @classmethod
    def for_config(cls, config: DLRMConfig, dense: np.ndarray, offsets: tuple[np.ndarray, ...],
                   indices: tuple[np.ndarray, ...],
                   weights: tuple[np.ndarray, ...] | None = None) -> "Batch":
        """A batch laid out as ``config`` takes its inputs. Weights are kept only
        when the config takes per-sample weights (and made up, as ones, when it
        does and none are given)."""
        if config.per_sample_weights and weights is None:
            weights = tuple(np.ones(i.shape[0], np.float32) for i in indices)
        return cls(dense, offsets, indices, weights if config.per_sample_weights else None,
                   config.input_layout, config.include_last_offset)

    @property
    def batch_size(self) -> int:
        """Examples in the batch: one dense row, and one bag per table, each."""
        return int(self.dense.shape[0])

    def _offsets_as_given(self) -> list[np.ndarray]:
        if not self.last_offset:
            return list(self.offsets)
        return [np.append(off, np.asarray(idx.shape[0], off.dtype)).astype(off.dtype)
                for off, idx in zip(self.offsets, self.indices)]

    def flat(self) -> list[np.ndarray]:
        """Inputs in the order the exported function takes them."""
        weights = list(self.weights) if self.weights is not None else []
        if self.layout == "stacked":
            stacked = [np.stack(self._offsets_as_given()), np.stack(self.indices)]
            return [self.dense, *stacked, *([np.stack(weights)] if weights else [])]
        if self.layout == "fixed":
            b = self.batch_size
            return [self.dense, *(i.reshape(b, -1) for i in self.indices),
                    *(w.reshape(b, -1) for w in weights)]
        return [self.dense, *self._offsets_as_given(), *self.indices, *weights]

    def validate(self, config: DLRMConfig) -> None:
        """Reject a batch ``config``'s model cannot take, before any target sees it."""
        dtype = np.dtype(config.index_dtype)
        if self.dense.dtype != np.float32 or self.dense.ndim != 2 \
                or self.dense.shape[1] != config.num_dense or self.dense.shape[0] < 1:
            raise InvalidSample(f"dense={self.dense.dtype}{list(self.dense.shape)}: must be "
                                f"float32 [B>=1, {config.num_dense}]")
        if len(self.offsets) != config.num_tables or len(self.indices) != config.num_tables:
            raise InvalidSample(f"tables={len(self.offsets)}/{len(self.indices)}: need offsets "
                                f"and indices for each of {config.num_tables} tables")
        if self.layout not in INPUT_LAYOUTS or self.layout != config.input_layout \
                or self.last_offset != config.include_last_offset:
            raise InvalidSample(f"layout={self.layout!r} last_offset={self.last_offset}: the config "
                                f"takes input_layout={config.input_layout!r} include_last_offset="
                                f"{config.include_last_offset}; build the batch with Batch.for_config")
        if (self.weights is not None) != config.per_sample_weights:
            raise InvalidSample(f"weights={'given' if self.weights is not None else None}: the "
                                f"config has per_sample_weights={config.per_sample_weights}")
        for k, (off, idx) in enumerate(zip(self.offsets, self.indices)):
            if off.dtype != dtype or idx.dtype != dtype:
                raise InvalidSample(f"table {k} dtype={off.dtype}/{idx.dtype}: must be {dtype}")
            if off.shape != (self.batch_size,) or idx.ndim != 1:
                raise InvalidSample(f"table {k} offsets shape={list(off.shape)}: must be "
                                    f"[{self.batch_size}] (one bag per dense row)")
            if off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] > idx.shape[0]:
                raise InvalidSample(f"table {k} offsets={off.tolist()}: must start at 0, never "
                                    f"decrease and stay <= len(indices)={idx.shape[0]}")
            if idx.size and (idx.min() < 0 or idx.max() >= config.ln_emb[k]):
                raise InvalidSample(f"table {k} indices in [{idx.min()}, {idx.max()}]: must be "
                                    f"in [0, {config.ln_emb[k]})")
            if self.weights is not None:
                w = self.weights[k]
                if w.dtype != np.float32 or w.shape != idx.shape or not np.isfinite(w).all():
                    raise InvalidSample(f"table {k} weights={w.dtype}{list(w.shape)}: must be "
                                        f"finite float32 [{idx.shape[0]}], one per index")
            if config.table_kind(k) == "qr" and idx.size:
                rows = -(-config.ln_emb[k] // config.qr_collisions)
                top = int(qr_quotient(idx, config.qr_collisions).max())
                if top >= rows:
                    raise InvalidSample(
                        f"table {k} index {int(idx.max())}: upstream's float32 quotient "
                        f"(index / {config.qr_collisions}).long() = {top} is past the "
                        f"{rows}-row quotient table (DLRM_Net itself fails on it)")
            lengths = self.bag_lengths(k)
            if self.layout == "fixed" and (lengths.min() < 1 or (lengths != lengths[0]).any()):
                raise InvalidSample(f"table {k} bag lengths={lengths.tolist()}: "
                                    f"input_layout='fixed' needs every bag of a table equally "
                                    f"long, at least 1")
        if self.layout == "stacked" and len({int(i.shape[0]) for i in self.indices}) > 1:
            raise InvalidSample(f"index counts={[int(i.shape[0]) for i in self.indices]}: "
                                f"input_layout='stacked' needs the same count in every table")

    def bag_lengths(self, k: int) -> np.ndarray:
        """How many indices each bag of table ``k`` pools (fixed layout needs them equal)."""
        ends = np.append(self.offsets[k][1:], self.indices[k].shape[0])
        return ends - self.offsets[k]


@dataclass(frozen=True, eq=False)
class Sample:
    """A config, the seed of its weights, and >= 1 input batches.

    ``draws``: more weight seeds to check against the same compiled program
    when the weights are program inputs (``fuzz.model.weights``): a run of the
    artifact each, no compile. A draw that fails becomes a sample of its own
    (``reseeded``), so a stored case always has exactly one seed."""

    config: DLRMConfig
    seed: int
    batches: tuple[Batch, ...]
    draws: tuple[int, ...] = ()

    def reseeded(self, seed: int) -> "Sample":
        """The same config and batches with ``seed``'s weights and no draws."""
        return Sample(self.config, seed, self.batches)

    def __post_init__(self) -> None:
        if not self.batches:
            raise InvalidSample("batches=[]: a sample needs at least one input batch")
        for batch in self.batches:
            batch.validate(self.config)

    # -- .npz --------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """Every batch's arrays by a flat name, the layout the stored ``.npz`` uses."""
        out: dict[str, np.ndarray] = {}
        for b, batch in enumerate(self.batches):
            out[f"b{b}_dense"] = batch.dense
            for k in range(self.config.num_tables):
                out[f"b{b}_offsets{k}"] = batch.offsets[k]
                out[f"b{b}_indices{k}"] = batch.indices[k]
                if batch.weights is not None:
                    out[f"b{b}_weights{k}"] = batch.weights[k]
        return out

    def npz_bytes(self) -> bytes:
        """The batches as ``.npz`` bytes, for storing a case in the corpus."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.arrays())  # type: ignore[arg-type]
        return buffer.getvalue()

    @classmethod
    def from_arrays(cls, config: DLRMConfig, seed: int, arrays: Any) -> "Sample":
        """Rebuild from an ``np.load(..., allow_pickle=False)`` mapping (the
        canonical form; the config says how it is laid out)."""
        batches = []
        b = 0
        tables = range(config.num_tables)
        while f"b{b}_dense" in arrays:
            weights = tuple(np.asarray(arrays[f"b{b}_weights{k}"]) for k in tables) \
                if f"b{b}_weights0" in arrays else None
            batches.append(Batch.for_config(
                config, np.asarray(arrays[f"b{b}_dense"]),
                tuple(np.asarray(arrays[f"b{b}_offsets{k}"]) for k in tables),
                tuple(np.asarray(arrays[f"b{b}_indices{k}"]) for k in tables),
                weights))
            b += 1
        return cls(config=config, seed=seed, batches=tuple(batches))

    def features(self) -> list[str]:
        """The code-path switches this sample turns on, as sorted short strings
        (recorded with a finding; the coarsest mismatch key, used only when
        localization and ablation both fail): each knob as its declaration
        says (``fuzz.model.config.Knob``), and empty bags."""
        config = self.config
        found = {shown for declared in KNOBS.values()
                 if (shown := declared.feature_of(config)) is not None}
        if any((batch.bag_lengths(k) == 0).any() for batch in self.batches
               for k in range(config.num_tables)):
            found.add("empty_bags")
        return sorted(found)

    def reduction_length(self) -> int:
        """The longest chain of reductions an output element goes through (the
        ``N`` of ``oracles.compare``'s precision rule): bottom-MLP fan-ins, the
        longest bag (its sum, or mean), the MD projection, the interaction's
        dot length, top-MLP fan-ins, plus one rounding per stored intermediate."""
        config = self.config
        longest_bag = max((int(batch.bag_lengths(k).max()) for batch in self.batches
                           for k in range(config.num_tables)), default=0)
        layers = len(config.ln_bot) + len(config.ln_top) - 2
        return (sum(config.ln_bot[:-1]) + longest_bag + 1 + config.base_width
                + config.embedding_width + sum(config.ln_top[:-1]) + 2 * layers + 4)

    def describe(self) -> str:
        """A one-line summary for logs: never raw tensors."""
        shapes = ", ".join(
            f"B={bt.batch_size} idx={[int(i.shape[0]) for i in bt.indices]}" for bt in self.batches)
        return f"seed={self.seed} tables={list(self.config.ln_emb)} batches=[{shapes}]"

