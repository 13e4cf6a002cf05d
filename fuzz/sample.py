"""The unit of fuzzing: a DLRM configuration, the seed its weights come from,
and the input batches to check against one compiled artifact.

Inputs are kept as numpy arrays (not torch tensors) so that the campaign
process, the corpus and the worker protocol never need torch, and so that a
sample saves to ``.npz`` and loads back with ``allow_pickle=False``.
Sparse inputs are jagged: every table has its own offsets and indices, and
tables may see different numbers of indices in the same batch.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.config import DLRMConfig

__all__ = ["Batch", "Sample", "InvalidSample"]


class InvalidSample(ValueError):
    """Inputs that DLRM_Net itself would reject (offsets out of order, an index
    past its table): never handed to a compiler, since any verdict would be noise."""


@dataclass(frozen=True, eq=False)
class Batch:
    """One forward call: dense features (B x num_dense float32) and, per table,
    bag offsets (B entries, first 0) and a flat index list."""

    dense: np.ndarray
    offsets: tuple[np.ndarray, ...]
    indices: tuple[np.ndarray, ...]

    @property
    def batch_size(self) -> int:
        return int(self.dense.shape[0])

    def flat(self) -> list[np.ndarray]:
        """Inputs in the order the exported function takes them."""
        return [self.dense, *self.offsets, *self.indices]

    def validate(self, config: DLRMConfig) -> None:
        dtype = np.dtype(config.index_dtype)
        if self.dense.dtype != np.float32 or self.dense.ndim != 2 \
                or self.dense.shape[1] != config.num_dense or self.dense.shape[0] < 1:
            raise InvalidSample(f"dense={self.dense.dtype}{list(self.dense.shape)}: must be "
                                f"float32 [B>=1, {config.num_dense}]")
        if len(self.offsets) != config.num_tables or len(self.indices) != config.num_tables:
            raise InvalidSample(f"tables={len(self.offsets)}/{len(self.indices)}: need offsets "
                                f"and indices for each of {config.num_tables} tables")
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

    def bag_lengths(self, k: int) -> np.ndarray:
        ends = np.append(self.offsets[k][1:], self.indices[k].shape[0])
        return ends - self.offsets[k]


@dataclass(frozen=True, eq=False)
class Sample:
    """A config, the seed of its weights, and >= 1 input batches."""

    config: DLRMConfig
    seed: int
    batches: tuple[Batch, ...]

    def __post_init__(self) -> None:
        if not self.batches:
            raise InvalidSample("batches=[]: a sample needs at least one input batch")
        for batch in self.batches:
            batch.validate(self.config)

    # -- .npz --------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for b, batch in enumerate(self.batches):
            out[f"b{b}_dense"] = batch.dense
            for k in range(self.config.num_tables):
                out[f"b{b}_offsets{k}"] = batch.offsets[k]
                out[f"b{b}_indices{k}"] = batch.indices[k]
        return out

    def npz_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, **self.arrays())  # type: ignore[arg-type]
        return buffer.getvalue()

    @classmethod
    def from_arrays(cls, config: DLRMConfig, seed: int, arrays: Any) -> "Sample":
        """Rebuild from an ``np.load(..., allow_pickle=False)`` mapping."""
        batches = []
        b = 0
        while f"b{b}_dense" in arrays:
            batches.append(Batch(
                dense=np.asarray(arrays[f"b{b}_dense"]),
                offsets=tuple(np.asarray(arrays[f"b{b}_offsets{k}"]) for k in range(config.num_tables)),
                indices=tuple(np.asarray(arrays[f"b{b}_indices{k}"]) for k in range(config.num_tables)),
            ))
            b += 1
        return cls(config=config, seed=seed, batches=tuple(batches))

    def features(self) -> list[str]:
        """The code-path switches this sample turns on, as sorted short strings
        (recorded with a finding; the coarsest mismatch key, used only when
        localization and ablation both fail)."""
        config = self.config
        found = {f"interaction={config.arch_interaction_op}"}
        if config.arch_interaction_op == "dot" and config.arch_interaction_itself:
            found.add("interaction_itself")
        if config.weighted_pooling:
            found.add(f"weighted_pooling={config.weighted_pooling}")
        for k in range(config.num_tables):
            kind = config.table_kind(k)
            if kind == "qr":
                found.add(f"qr={config.qr_operation}")
            elif kind == "quantized":
                found.add(f"quantized={config.quantize_bits}")
            elif kind == "md":
                found.add("md")
        if config.index_dtype != "int64":
            found.add(f"index_dtype={config.index_dtype}")
        if any((batch.bag_lengths(k) == 0).any() for batch in self.batches
               for k in range(config.num_tables)):
            found.add("empty_bags")
        if 0.0 < config.loss_threshold < 1.0:
            found.add("clamp")
        return sorted(found)

    def describe(self) -> str:
        """A one-line summary for logs: never raw tensors."""
        shapes = ", ".join(
            f"B={bt.batch_size} idx={[int(i.shape[0]) for i in bt.indices]}" for bt in self.batches)
        return f"seed={self.seed} tables={list(self.config.ln_emb)} batches=[{shapes}]"

