"""Every hyperparameter of facebookresearch/dlrm's ``DLRM_Net`` that changes
``sequential_forward``, held in one frozen, JSON-round-trippable dataclass.

The invariants DLRM only discovers at run time (a bottom MLP that does not end
at the embedding width, a top MLP whose input width does not match what the
interaction produces) are checked here, up front, so that a bad configuration
is a one-line ``InvalidConfig`` naming the field, its value and the fix, never
a shape error deep inside a compiled module that would look like a compiler bug.

One room a little over 400 lines, because it is one job that cannot be cut
further: the fields with their knob declarations, the checks that read those
declarations (``KNOBS``, which a new value extends without code elsewhere),
the values derived from the fields and the JSON round trip are the type
itself; and the helpers built on the type (``config_with``, ``knobs``,
``STRUCTURE``) must stay importable from here, so they cannot move above it.
What needs no config is apart: a knob's declaration (``knob``), the error
type and its messages (``validation``), the width arithmetic (``widths``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from fuzz.model.knob import Knob, allowed_values, knob
from fuzz.model.validation import InvalidConfig, int_tuple, invalid
from fuzz.model.widths import embedding_width, interaction_width, with_derived_widths

__all__ = [
    "DLRMConfig",
    "embedding_width",
    "interaction_width",
    "InvalidConfig",
    "InputLayout",
    "Knob",
    "knob",
    "KNOBS",
    "INTERACTION_OPS",
    "QR_OPERATIONS",
    "WEIGHTED_POOLING",
    "QUANTIZE_BITS",
    "INDEX_DTYPES",
    "DTYPES",
    "QUANTIZE_MLP",
    "POOLINGS",
    "INPUT_LAYOUTS",
    "WEIGHT_FORMS",
    "weights_as_inputs",
    "STRUCTURE",
    "knobs",
    "with_derived_widths",
    "config_with",
]


# The input layouts as a type of their own: presets spell theirs with it.
InputLayout = Literal["lists", "stacked", "fixed"]


@dataclass(frozen=True)
class DLRMConfig:
    """One DLRM architecture, named as in ``DLRM_Net.__init__``.

    ``m_spa`` is the sparse feature size: one int, or (only with ``md_flag``)
    one width per table. ``ln_bot[0]`` is the number of dense features.

    The fields after ``index_dtype`` go beyond ``DLRM_Net``'s constructor:
    ``dtype`` (tables and MLPs in float16/bfloat16, as models are served),
    ``quantize_mlp`` (upstream's inference-time ``quantize_mlp_with_bit``:
    dynamic qint8 or float16 ``nn.Linear``), ``input_layout`` (``lists``: one
    offsets and one indices tensor per table, as today; ``stacked``: offsets and
    indices stacked into 2-D tensors, the Criteo loader's layout; ``fixed``:
    one 2-D ``[batch, bag length]`` index tensor per table and no offsets, both
    accepted by upstream's ``apply_emb``), and the embedding-bag variants of
    DLRM's descendants (TorchRec / FBGEMM), which upstream DLRM never sets:
    ``pooling`` mean/max, ``include_last_offset`` (B+1 offsets),
    ``padding_idx`` (a row every bag skips) and ``per_sample_weights`` (weights
    handed in with the indices rather than gathered from ``v_W_l``). Their
    defaults are today's model, so a config JSON written before they existed
    loads unchanged.

    Every knob's field declares, with ``knob(...)``, what the rest of
    dlrm-fuzz derives from it (allowed values, feature name, ablation,
    coverage, matrix rows: ``Knob``); the fields without one are sizes or
    bookkeeping (``STRUCTURE``).
    """

    m_spa: int | tuple[int, ...]
    ln_emb: tuple[int, ...]
    ln_bot: tuple[int, ...]
    ln_top: tuple[int, ...]
    arch_interaction_op: Literal["dot", "cat"] = field(default="dot", metadata=knob(
        feature="interaction", always=True))
    # Self-interaction adds the diagonal pairs of the dot product; cat ignores it.
    arch_interaction_itself: bool = field(default=False, metadata=knob(
        feature="interaction_itself", feature_when=("arch_interaction_op", "dot")))
    sigmoid_bot: int = field(default=-1, metadata=knob(coverage="on/off", matrix=True, example=0))
    sigmoid_top: int = field(default=-1, metadata=knob(coverage="on/off", matrix=True, example=0))
    loss_threshold: float = field(default=0.0, metadata=knob(
        feature="clamp", coverage="on/off", coverage_label="clamp",
        matrix="clamp (loss_threshold)", example=0.01))
    weighted_pooling: Literal["fixed", "learned"] | None = field(default=None, metadata=knob(
        feature="weighted_pooling"))
    # QR tables show as qr=<operation> (below), so the flag is no feature of its own.
    qr_flag: bool = field(default=False, metadata=knob(path="qr"))
    qr_operation: Literal["mult", "add", "concat"] = field(default="mult", metadata=knob(
        feature="qr", path="qr", switch="qr_flag", matrix_with=(("qr_threshold", 4),)))
    qr_collisions: int = field(default=4, metadata=knob(path="qr", coverage=None))
    qr_threshold: int = field(default=200, metadata=knob(path="qr", coverage=None))
    md_flag: bool = field(default=False, metadata=knob(
        feature="md", path="md", matrix_with=(("md_threshold", 4), ("m_spa", (2, 4)))))
    md_threshold: int = field(default=200, metadata=knob(path="md", coverage=None))
    quantize_bits: int = field(default=32, metadata=knob(
        values=(32, 8, 4), feature="quantized", path="quantized"))
    index_dtype: Literal["int64", "int32"] = field(default="int64", metadata=knob(
        feature="index_dtype"))
    dtype: Literal["float32", "float16", "bfloat16"] = field(default="float32", metadata=knob(
        feature="dtype", extension=True))
    quantize_mlp: Literal["none", "qint8", "float16"] = field(default="none", metadata=knob(
        feature="quantize_mlp", extension=True))
    pooling: Literal["sum", "mean", "max"] = field(default="sum", metadata=knob(
        feature="pooling", extension=True))
    include_last_offset: bool = field(default=False, metadata=knob(
        feature="include_last_offset", extension=True))
    padding_idx: int | None = field(default=None, metadata=knob(
        feature="padding_idx", coverage="set", example=1, extension=True))
    per_sample_weights: bool = field(default=False, metadata=knob(
        feature="per_sample_weights", extension=True))
    input_layout: InputLayout = field(default="lists", metadata=knob(
        feature="input_layout", extension=True))
    # How the program carries the weights (``fuzz.model.weights``): ``inline``
    # constants, as torch-mlir imports a module by default, or function
    # ``inputs`` (one compiled program for every weight draw and table size).
    # No feature: the export form, not a code path of the model.
    weights: Literal["inline", "inputs"] = field(default="inline", metadata=knob(extension=True))
    # Not a DLRM_Net argument: lets a JSON file say which schema it follows.
    schema: int = field(default=1, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "ln_emb", int_tuple("ln_emb", self.ln_emb, min_len=1, min_value=1))
        set_(self, "ln_bot", int_tuple("ln_bot", self.ln_bot, min_len=2, min_value=1))
        set_(self, "ln_top", int_tuple("ln_top", self.ln_top, min_len=2, min_value=1))
        if isinstance(self.m_spa, numbers.Integral) and not isinstance(self.m_spa, bool):
            set_(self, "m_spa", int(self.m_spa))
        if isinstance(self.m_spa, bool) or not isinstance(self.m_spa, int):
            widths = int_tuple("m_spa", self.m_spa, min_len=1, min_value=1)
            if not self.md_flag:
                raise invalid("m_spa", list(widths), "a per-table list needs md_flag=True; "
                            "otherwise give one integer")
            if len(widths) != len(self.ln_emb):
                raise invalid("m_spa", list(widths),
                            f"needs one width per table ({len(self.ln_emb)}, as ln_emb)")
            set_(self, "m_spa", widths)
        elif self.m_spa < 1:
            raise invalid("m_spa", self.m_spa, "must be >= 1")
        self._check_choices()
        self._check_widths()

    def _check_choices(self) -> None:
        for declared in KNOBS.values():
            value = getattr(self, declared.name)
            if declared.valued and value not in declared.choices:
                raise invalid(declared.name, value, f"must be one of {list(declared.choices)}")
        for declared in KNOBS.values():
            value = getattr(self, declared.name)
            if declared.values == (False, True) and not isinstance(value, bool):
                raise invalid(declared.name, value, "must be true or false")
        for name in ("qr_threshold", "md_threshold", "sigmoid_bot", "sigmoid_top"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise invalid(name, value, "must be an integer")
        if isinstance(self.qr_collisions, bool) or not isinstance(self.qr_collisions, int) \
                or self.qr_collisions < 1:
            raise invalid("qr_collisions", self.qr_collisions, "must be an integer >= 1")
        if self.schema != 1:
            raise invalid("schema", self.schema, "this dlrm-fuzz reads config schema 1 only")
        for name, widths in (("sigmoid_bot", self.ln_bot), ("sigmoid_top", self.ln_top)):
            last = len(widths) - 2
            if not -1 <= getattr(self, name) <= last:
                raise invalid(name, getattr(self, name),
                            f"must be -1 (no sigmoid) or a layer index 0..{last}")
        if isinstance(self.loss_threshold, bool) or not isinstance(self.loss_threshold, (int, float)) or not (
            0.0 <= self.loss_threshold <= 0.5 and math.isfinite(self.loss_threshold)
        ):
            raise invalid("loss_threshold", self.loss_threshold,
                        "must be in [0, 0.5]; 0 disables the output clamp")
        if self.quantize_bits != 32 and (self.qr_flag or self.md_flag):
            raise invalid("quantize_bits", self.quantize_bits,
                        "quantized tables are plain tables: set qr_flag and md_flag to false "
                        "(DLRM prepacks only nn.EmbeddingBag weights)")
        if self.quantize_bits == 4 and self.embedding_width % 2:
            raise invalid("quantize_bits", 4, f"4-bit tables need an even width, "
                        f"got {self.embedding_width}; use an even m_spa")
        if self.qr_flag and self.qr_operation == "concat":
            small = [n for n in self.ln_emb if n <= self.qr_threshold]
            if small:
                raise invalid("qr_threshold", self.qr_threshold,
                            f"with qr_operation='concat' every table must be a QR table "
                            f"(rows > qr_threshold), but tables of {small} rows are not: "
                            f"lower qr_threshold below {min(self.ln_emb)}")
        self._check_extensions()

    def _check_extensions(self) -> None:
        """The knobs beyond ``DLRM_Net``'s constructor: combinations torch or
        upstream's code cannot run are rejected here, one line each."""
        if self.pooling != "sum":
            if self.per_sample_weights:
                raise invalid("per_sample_weights", True,
                            f"torch's embedding_bag takes per-sample weights only with "
                            f"pooling='sum' (got pooling={self.pooling!r}): set pooling='sum' "
                            f"or per_sample_weights=False")
            if self.weighted_pooling is not None:
                raise invalid("weighted_pooling", self.weighted_pooling,
                            f"pooling weights are per-sample weights, which torch's embedding_bag "
                            f"takes only with pooling='sum' (got pooling={self.pooling!r})")
            if self.md_flag or self.quantize_bits != 32:
                raise invalid("pooling", self.pooling,
                            "mean/max pooling is for plain and QR tables only (upstream's MD "
                            "PrEmbeddingBag and quantized tables sum): set md_flag=False and "
                            "quantize_bits=32, or pooling='sum'")
        if self.per_sample_weights and self.weighted_pooling is not None:
            raise invalid("per_sample_weights", True,
                        f"weighted_pooling={self.weighted_pooling!r} already supplies the per-sample "
                        f"weights: set weighted_pooling=None or per_sample_weights=False")
        if self.padding_idx is not None:
            if isinstance(self.padding_idx, bool) or not isinstance(self.padding_idx, int):
                raise invalid("padding_idx", self.padding_idx, "must be null or an integer row index")
            if not 0 <= self.padding_idx < min(self.ln_emb):
                raise invalid("padding_idx", self.padding_idx,
                            f"must be a row of every table: 0..{min(self.ln_emb) - 1} "
                            f"(the smallest table has {min(self.ln_emb)} rows)")
            kinds = [self.table_kind(k) for k in range(self.num_tables)]
            other = next((k for k, kind in enumerate(kinds) if kind != "plain"), None)
            if other is not None:
                raise invalid("padding_idx", self.padding_idx,
                            f"only plain nn.EmbeddingBag tables have a padding row, but table "
                            f"{other} is {kinds[other]!r}: drop padding_idx or make every table "
                            f"plain (qr_flag/md_flag false, quantize_bits=32)")
        if self.dtype != "float32":
            if self.quantize_bits != 32:
                raise invalid("dtype", self.dtype, "quantized tables dequantize to float32: "
                            "use dtype='float32' with quantize_bits 8 or 4")
            if self.quantize_mlp != "none":
                raise invalid("quantize_mlp", self.quantize_mlp,
                            f"dynamic quantization converts float32 nn.Linear layers, but "
                            f"dtype={self.dtype!r}: use dtype='float32'")
        if self.input_layout == "fixed":
            if self.include_last_offset:
                raise invalid("include_last_offset", True,
                            "input_layout='fixed' has no offsets (each row of the 2-D indices is "
                            "a bag): use input_layout 'lists' or 'stacked'")
            if self.weighted_pooling is not None:
                raise invalid("weighted_pooling", self.weighted_pooling,
                            "upstream gathers pooling weights with v_W.gather(0, indices), which "
                            "needs 1-D indices: use input_layout 'lists' or 'stacked'")

    def _check_widths(self) -> None:
        width = self.embedding_width
        if self.ln_bot[-1] != width:
            raise invalid("ln_bot", list(self.ln_bot),
                        f"must end at the embedding width {width} "
                        f"(the sparse feature size{' x2 for QR concat' if self.qr_concat else ''})")
        expected = self.interaction_width
        if self.ln_top[0] != expected:
            raise invalid("ln_top", list(self.ln_top),
                        f"must start at {expected}, the width the "
                        f"'{self.arch_interaction_op}' interaction produces")

    @property
    def qr_concat(self) -> bool:
        """Concatenating QR tables pool twice the width, which the MLP widths must allow for."""
        return self.qr_flag and self.qr_operation == "concat"

    @property
    def num_dense(self) -> int:
        """Dense features per example: the bottom MLP's input width."""
        return self.ln_bot[0]

    @property
    def num_tables(self) -> int:
        """One embedding table (and one sparse input) per ``ln_emb`` entry."""
        return len(self.ln_emb)

    @property
    def base_width(self) -> int:
        """m_spa, or its maximum with mixed dimensions (DLRM's ``base``)."""
        return max(self.m_spa) if isinstance(self.m_spa, tuple) else self.m_spa

    def table_width(self, k: int) -> int:
        """The width table ``k`` stores (before any MD projection)."""
        if isinstance(self.m_spa, tuple) and self.table_kind(k) == "md":
            return self.m_spa[k]
        return self.base_width

    @property
    def embedding_width(self) -> int:
        """Width of every table's pooled output, which the bottom MLP must match."""
        return embedding_width(self.m_spa, self.qr_concat)

    @property
    def upstream(self) -> bool:
        """Whether unmodified upstream ``DLRM_Net`` runs this config: none of
        the descendants' embedding-bag variants and float32 weights (the
        inference-only MLP quantization and both 2-D input layouts are upstream's)."""
        return (self.pooling == "sum" and not self.include_last_offset and self.padding_idx is None
                and not self.per_sample_weights and self.dtype == "float32")

    def table_kind(self, k: int) -> Literal["plain", "qr", "md", "quantized"]:
        """Which DLRM code path table ``k`` takes (QR is checked before MD, as in DLRM)."""
        rows = self.ln_emb[k]
        if self.qr_flag and rows > self.qr_threshold:
            return "qr"
        if self.md_flag and rows > self.md_threshold:
            return "md"
        if self.quantize_bits != 32:
            return "quantized"
        return "plain"

    @property
    def interaction_width(self) -> int:
        """Width the interaction hands the top MLP, which ``ln_top[0]`` must equal."""
        return interaction_width(self.embedding_width, self.num_tables,
                                 self.arch_interaction_op, self.arch_interaction_itself)

    # -- JSON --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields (tuples as lists): cache keys and stored cases use it."""
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    def to_json(self) -> str:
        """Canonical JSON (sorted keys), so equal configs give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any) -> "DLRMConfig":
        """Rebuild a config from JSON data, naming the first unknown or missing field."""
        if not isinstance(data, dict):
            raise InvalidConfig(f"config={type(data).__name__}: must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidConfig(f"{unknown[0]}={data[unknown[0]]!r}: unknown DLRM config "
                                f"field; known fields are {sorted(known)}")
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        missing = [name for name in required if name not in data]
        if missing:
            raise InvalidConfig(f"{missing[0]}=<missing>: required DLRM config field")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "DLRMConfig":
        """Parse stored or user-given JSON text, malformed text as ``InvalidConfig``."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidConfig(f"config JSON is malformed: {exc}") from exc
        return cls.from_dict(data)


def weights_as_inputs(config: DLRMConfig) -> bool:
    """Does this config's program take its weights as inputs (``fuzz.model.weights``)?
    Only when every seed-dependent tensor can be one: quantized tables
    (prepacked uint8 drawn from the seed), dynamically quantized MLPs (not
    tensors) and bfloat16 (numpy has none) keep all weights inline, so the
    program is the same for every seed exactly when this is true."""
    return config.weights == "inputs" and config.dtype != "bfloat16" \
        and config.quantize_bits == 32 and config.quantize_mlp == "none"


def _declared_knobs() -> dict[str, Knob]:
    """The fields' declarations completed; a declaration whose default is not
    its first value stops the import (every reader takes values default first)."""
    hints = typing.get_type_hints(DLRMConfig)
    out: dict[str, Knob] = {}
    for f in dataclasses.fields(DLRMConfig):
        if "knob" not in f.metadata:
            continue
        values = allowed_values(hints[f.name], f.metadata["knob"], f.default)
        if values is not None and values[0] != f.default:
            raise TypeError(f"DLRMConfig.{f.name}: values={values!r} must start at the "
                            f"default {f.default!r}")
        out[f.name] = dataclasses.replace(f.metadata["knob"], name=f.name, default=f.default,
                                          values=values)
    return out


KNOBS: dict[str, Knob] = _declared_knobs()
"""Every knob of ``DLRMConfig`` in field order, as declared on its field."""

# Fields of DLRMConfig that are structure (sizes shrunk by their own edits) or
# bookkeeping, not knobs: the fields declared without ``knob(...)``.
STRUCTURE = frozenset(f.name for f in dataclasses.fields(DLRMConfig) if f.name not in KNOBS)


# The allowed values of the choice knobs, by their old names (read from KNOBS).
INTERACTION_OPS = KNOBS["arch_interaction_op"].choices
QR_OPERATIONS = KNOBS["qr_operation"].choices
WEIGHTED_POOLING = KNOBS["weighted_pooling"].choices
QUANTIZE_BITS = KNOBS["quantize_bits"].choices
INDEX_DTYPES = KNOBS["index_dtype"].choices
DTYPES = KNOBS["dtype"].choices
QUANTIZE_MLP = KNOBS["quantize_mlp"].choices
POOLINGS = KNOBS["pooling"].choices
INPUT_LAYOUTS = KNOBS["input_layout"].choices
WEIGHT_FORMS = KNOBS["weights"].choices


def knobs() -> dict[str, Any]:
    """Every knob of ``DLRMConfig`` with its default (``KNOBS``), so that a knob
    added to the config is shrunk, ablated and focused without code elsewhere."""
    return {name: declared.default for name, declared in KNOBS.items()}


def config_with(config: DLRMConfig, **changes: Any) -> DLRMConfig | None:
    """``config`` with ``changes``, the derived widths recomputed; ``None`` if
    no valid config has these values. Mixed widths collapse to their maximum
    once MD is off, and a QR-concat threshold is lowered under the smallest
    table so that every table stays a QR table (what concat requires)."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    values.update(changes)
    ln_emb = tuple(values["ln_emb"])
    if not ln_emb:
        return None
    concat = bool(values["qr_flag"]) and values["qr_operation"] == "concat"
    if concat and values["qr_threshold"] >= min(ln_emb):
        values["qr_threshold"] = min(ln_emb) - 1
    try:
        return DLRMConfig(**with_derived_widths(values))
    except InvalidConfig:
        return None
