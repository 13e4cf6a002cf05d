"""A region of the sample space that a campaign stays inside: ``--focus``,
``--config`` / ``--preset`` and ``--neighbours``, as one ``Focus`` value.

A focus pins ``DLRMConfig`` fields to values (any field, read from the
dataclass and parsed by its type: ``pooling=mean``, ``ln_emb=[4,8]``,
``padding_idx=none``), names input edge cases every sample must hold
(``input=empty_bags``, ``input=batch_of_one``, ``input=duplicate_index``,
``input=last_row``: the cases ``strategies.inputs`` draws on purpose) and
optionally a shape class (``shape=tiny|medium|large``, as
``fuzz.model.shapes.SHAPE_CLASSES``). ``--config`` pins every field of one
configuration; ``--neighbours`` keeps only its tables and widths (the widths
DLRM derives follow the knobs) and lets every knob the focus leaves free vary.

Generation projects each drawn config onto the pins (``Focus.project``: the
pinned values set, sizes fitted, the free knobs that conflict with them back
at their defaults) and rejects the rest; the shrinker never tries a candidate
outside the region (``Focus.holds``). An impossible focus is a ``FocusError``
whose one-line message names the conflicting ``DLRMConfig`` rule and the fix.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Union

import numpy as np

from fuzz.model.config import (STRUCTURE, DLRMConfig, InvalidConfig, config_with, knobs,
                               with_derived_widths)
from fuzz.model.sample import Sample, top_index
from fuzz.model.shapes import SHAPE_CLASSES

__all__ = ["Focus", "FocusError", "INPUT_CLASSES", "SHAPES", "make_focus", "parse_focus",
           "load_config", "shape_class", "config_shape"]

SHAPES = ("tiny", "medium", "large")
# Where the large class starts: indices float32 cannot represent exactly.
_LARGE_INDEX = 2 ** 24


def _bag_lengths(sample: Sample) -> list[np.ndarray]:
    return [batch.bag_lengths(k) for batch in sample.batches
            for k in range(sample.config.num_tables)]


def _has_duplicate(sample: Sample) -> bool:
    for batch in sample.batches:
        for k in range(sample.config.num_tables):
            starts = batch.offsets[k]
            ends = np.append(starts[1:], batch.indices[k].shape[0])
            for start, end in zip(starts, ends):
                bag = batch.indices[k][int(start):int(end)]
                if bag.size != np.unique(bag).size:
                    return True
    return False


def _hits_last_row(sample: Sample) -> bool:
    config = sample.config
    return any(batch.indices[k].size and int(batch.indices[k].max()) >= top_index(config, k)
               for batch in sample.batches for k in range(config.num_tables))


INPUT_CLASSES: dict[str, tuple[str, Callable[[Sample], bool]]] = {
    "empty_bags": ("some bag holds no index",
                   lambda s: any((lengths == 0).any() for lengths in _bag_lengths(s))),
    "batch_of_one": ("some batch holds one example",
                     lambda s: any(batch.batch_size == 1 for batch in s.batches)),
    "duplicate_index": ("some bag holds an index twice", _has_duplicate),
    "last_row": ("some index is its table's last row (the last one upstream's QR quotient "
                 "keeps, for a QR table past 2^24 rows)", _hits_last_row),
}
"""Input edge cases, by name: what each means and whether a sample holds it
(one visible table; the coverage table counts each as ``input=NAME``)."""


def _tiny_limits() -> dict[str, int]:
    """The strategies' tiny class as size limits; a reshaped batch may gather
    a whole batch's indices into one bag (max_batch x max_bag)."""
    tiny = SHAPE_CLASSES["tiny"]
    return {"tables": tiny.max_tables, "rows": tiny.max_rows, "width": tiny.max_width,
            "batch": tiny.max_batch, "bag": tiny.max_batch * tiny.max_bag}


def shape_class(sample: Sample) -> str:
    """tiny / medium / large, from the sample's sizes (not from how it was drawn:
    a shrunk or stored sample is classed the same way)."""
    config = sample.config
    widths = config.m_spa if isinstance(config.m_spa, tuple) else (config.m_spa,)
    if max(config.ln_emb) > _LARGE_INDEX:
        return "large"
    bags = [int(lengths.max(initial=0)) for lengths in _bag_lengths(sample)]
    sizes = {"tables": config.num_tables, "rows": max(config.ln_emb), "width": max(widths),
             "batch": max((b.batch_size for b in sample.batches), default=1),
             "bag": max(bags, default=0)}
    return "tiny" if all(sizes[k] <= limit for k, limit in _tiny_limits().items()) else "medium"


def config_shape(config: DLRMConfig) -> str | None:
    """The shape class ``config``'s sizes alone force (``large`` past 2^24 rows,
    ``medium`` past the tiny class's tables, rows or width), or ``None`` when
    its batches decide."""
    widths = config.m_spa if isinstance(config.m_spa, tuple) else (config.m_spa,)
    if max(config.ln_emb) > _LARGE_INDEX:
        return "large"
    tiny = _tiny_limits()
    if config.num_tables > tiny["tables"] or max(config.ln_emb) > tiny["rows"] \
            or max(widths) > tiny["width"]:
        return "medium"
    return None


def _shape_allows(shape: str | None, config: DLRMConfig) -> bool:
    forced = config_shape(config)
    return shape is None or forced == shape or (forced is None and shape != "large")


class FocusError(ValueError):
    """A focus, configuration file or preset that names no sample: the message
    is one line saying which value or rule and how to fix it."""


# -- parsing -------------------------------------------------------------------
def _split(text: str) -> list[str]:
    """``a=1,b=[2,3]`` -> ``["a=1", "b=[2,3]"]``: commas inside brackets stay."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += char in "[(" 
        depth -= char in "])"
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return [item.strip() for item in items if item.strip()]


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _parse_value(text: str, hint: Any) -> Any:
    """``text`` as a value of the type ``hint``; ValueError with what it must be."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        wants = []
        for arg in sorted(args, key=lambda a: a is not type(None)):  # None first
            try:
                return _parse_value(text, arg)
            except ValueError as exc:
                wants.append(str(exc))
        raise ValueError(" or ".join(wants))
    if hint is type(None):
        if text.lower() in ("none", "null"):
            return None
        raise ValueError("none")
    if origin is Literal:
        for choice in args:
            if str(choice) == text:
                return choice
        raise ValueError(f"one of {', '.join(str(a) for a in args)}")
    if hint is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError("true or false")
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError("an integer") from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("a number") from None
    if origin is tuple:
        inner = text.strip()
        if not (inner[:1] in "[(" and inner[-1:] in "])" and len(inner) >= 2):
            raise ValueError("a list such as [4,8]")
        return tuple(_parse_value(part.strip(), args[0]) for part in inner[1:-1].split(",")
                     if part.strip())
    raise ValueError(f"a {hint}")  # a field type this parser does not know yet


def parse_focus(text: str) -> tuple[dict[str, Any], tuple[str, ...], str | None]:
    """``KNOB=VALUE[,KNOB=VALUE...]`` -> (pinned DLRMConfig fields, input edge
    cases, shape class); a ``FocusError`` names the first bad item."""
    hints = typing.get_type_hints(DLRMConfig)
    fields = [f.name for f in dataclasses.fields(DLRMConfig)]
    pins: dict[str, Any] = {}
    inputs: list[str] = []
    shape: str | None = None
    for item in _split(text):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not value:
            raise FocusError(f"--focus {item!r}: write KNOB=VALUE (e.g. pooling=mean)")
        if name == "input":
            if value not in INPUT_CLASSES:
                raise FocusError(f"--focus input={value}: unknown input edge case; choose from "
                                 f"{', '.join(INPUT_CLASSES)}")
            inputs.append(value)
        elif name == "shape":
            if value not in SHAPES or shape not in (None, value):
                raise FocusError(f"--focus shape={value}: give one shape class of "
                                 f"{', '.join(SHAPES)}")
            shape = value
        elif name in hints and name in fields:
            try:
                parsed = _parse_value(value, hints[name])
            except ValueError as exc:
                raise FocusError(f"--focus {name}={value}: must be {exc}") from None
            if name in pins and pins[name] != parsed:
                raise FocusError(f"--focus {name}: given twice ({pins[name]!r} and {parsed!r}); "
                                 f"keep one")
            pins[name] = parsed
        else:
            raise FocusError(f"--focus {name}={value}: unknown knob; choose a DLRMConfig field "
                             f"({', '.join(fields)}), input=... or shape=...")
    return pins, tuple(dict.fromkeys(inputs)), shape


def load_config(path: Path) -> DLRMConfig:
    """A ``DLRMConfig`` JSON file (``DLRMConfig.to_dict``'s format; a stored
    ``case.json`` works too: its ``config`` is taken)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise FocusError(f"--config {path}: unreadable ({exc}); give a DLRMConfig JSON file "
                         f"as DLRMConfig.to_json writes it") from None
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]
    try:
        return DLRMConfig.from_dict(data)
    except (InvalidConfig, TypeError) as exc:
        raise FocusError(f"--config {path}: {exc}") from None


# -- the region ----------------------------------------------------------------
# The ends of the MLP widths that DLRM derives from the other fields: a pin
# on ``ln_bot`` / ``ln_top`` holds the widths the user chooses, these follow.
_CHOSEN = {"ln_bot": slice(None, -1), "ln_top": slice(1, None)}


def _same(name: str, got: Any, want: Any) -> bool:
    part = _CHOSEN.get(name)
    return got == want if part is None else tuple(got)[part] == tuple(want)[part]


@dataclass(frozen=True)
class Focus:
    """The region: ``pins`` (DLRMConfig field -> value; for ``ln_bot`` and
    ``ln_top`` the widths but the end DLRM derives), ``inputs``
    (``INPUT_CLASSES`` names every sample holds) and ``shape`` (a shape class
    or None). ``label`` is what the user asked for, for reports. Build one
    with ``make_focus``."""

    pins: tuple[tuple[str, Any], ...] = ()
    inputs: tuple[str, ...] = ()
    shape: str | None = None
    label: str = ""

    @property
    def pinned(self) -> dict[str, Any]:
        """The pinned fields as a mapping."""
        return dict(self.pins)

    def config_holds(self, config: DLRMConfig) -> bool:
        """Does ``config`` have every pinned value?"""
        return all(_same(name, getattr(config, name), want) for name, want in self.pins)

    def holds(self, sample: Sample) -> bool:
        """Is ``sample`` inside the region: config, input edge cases, shape class?"""
        return self.config_holds(sample.config) \
            and all(INPUT_CLASSES[name][1](sample) for name in self.inputs) \
            and (self.shape is None or shape_class(sample) == self.shape)

    def _fit(self, values: dict[str, Any]) -> dict[str, Any]:
        """The pinned values set, and the sizes the focus leaves free made to
        fit them: tables past a pinned padding row or QR-concat threshold, an
        even width for 4-bit tables, one width per table, sigmoids on layers
        that exist."""
        fixed, values = self.pinned, {**values, **self.pinned}
        floor = 1
        if isinstance(values["padding_idx"], int) and "padding_idx" in fixed:
            floor = values["padding_idx"] + 1
        if values["qr_flag"] and values["qr_operation"] == "concat" and "qr_threshold" in fixed:
            floor = max(floor, values["qr_threshold"] + 1)
        if "ln_emb" not in fixed:
            values["ln_emb"] = tuple(max(rows, floor) for rows in values["ln_emb"])
        m_spa = values["m_spa"]
        if "m_spa" not in fixed:
            if isinstance(m_spa, tuple) and len(m_spa) != len(values["ln_emb"]):
                m_spa = tuple(m_spa[k % len(m_spa)] for k in range(len(values["ln_emb"])))
            if isinstance(m_spa, int) and values["quantize_bits"] == 4 and m_spa % 2:
                m_spa += 1
            values["m_spa"] = m_spa
        for name, widths in (("sigmoid_bot", values["ln_bot"]), ("sigmoid_top", values["ln_top"])):
            if name not in fixed and values[name] > len(widths) - 2:
                values[name] = -1
        return values

    def _moved(self, config: DLRMConfig) -> DLRMConfig | None:
        values = self._fit({f.name: getattr(config, f.name) for f in dataclasses.fields(config)})
        moved = _derived(values)
        if moved is not None and self.config_holds(moved):
            return moved
        defaults = knobs()
        free = [name for name, default in defaults.items()
                if name not in self.pinned and values[name] != default]
        best = _derived({**values, **{name: defaults[name] for name in free}})
        if best is None or not self.config_holds(best):
            return None
        for name in free:
            trial = config_with(best, **{name: values[name]})
            if trial is not None and self.config_holds(trial):
                best = trial
        return best

    def project(self, config: DLRMConfig) -> DLRMConfig | None:
        """``config`` moved into the region: the pinned values set, free sizes
        fitted, and, where the drawn free knobs conflict with the pins, those
        back at their defaults (the rest kept, in field order). ``None`` when
        no config of the region is near, or its sizes leave the focused shape
        class (the draw is rejected before any batch is drawn)."""
        moved = self._moved(config)
        return moved if moved is not None and _shape_allows(self.shape, moved) else None


def _derived(values: dict[str, Any]) -> DLRMConfig | None:
    try:
        return DLRMConfig(**with_derived_widths(values))
    except InvalidConfig:
        return None


# The plainest DLRM: what an impossible focus is checked against.
_PLAINEST = DLRMConfig(m_spa=2, ln_emb=(4,), ln_bot=(1, 2), ln_top=(3, 1))


def make_focus(text: str | None = None, config: DLRMConfig | None = None,
               neighbours: bool = False, label: str | None = None) -> Focus:
    """The region of ``--focus TEXT`` (``None``: no pins), optionally around
    ``config`` (``--config`` / ``--preset``: every field pinned, or with
    ``neighbours`` its tables and widths kept and the knobs the focus leaves
    free varied). An impossible combination is a ``FocusError`` naming the
    rule and the fix."""
    pins, inputs, shape = parse_focus(text or "")
    if neighbours and config is None:
        raise FocusError("--neighbours: varies the knobs around a given model; "
                         "add --config FILE or --preset NAME")
    if isinstance(pins.get("m_spa"), tuple):  # a width per table is what MD tables are
        pins.setdefault("md_flag", True)
    name = label or " + ".join(part for part in (
        f"focus {text}" if text else "", f"config {_digest(config)}" if config else "",
        "neighbours" if neighbours else "") if part)
    base = config if config is not None else _PLAINEST
    values = Focus(tuple(pins.items()))._fit(
        {f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    try:
        # Pinned values that cannot live together break DLRMConfig's own rule.
        derived = DLRMConfig(**with_derived_widths(values))
    except InvalidConfig as exc:
        raise FocusError(f"{name}: impossible: {exc}") from None
    for field_name, want in pins.items():
        if not _same(field_name, getattr(derived, field_name), want):
            raise FocusError(f"{name}: impossible: {field_name}={want!r} does not survive the "
                             f"other fields (DLRM derives {getattr(derived, field_name)!r} "
                             f"from them): change or drop it")
    if "empty_bags" in inputs and derived.input_layout == "fixed" \
            and ("input_layout" in pins or (config is not None and not neighbours)):
        raise FocusError(f"{name}: impossible: input=empty_bags with input_layout='fixed': "
                         f"fixed-length bags hold at least one index each; focus "
                         f"input_layout=lists or stacked, or drop input=empty_bags")
    sized = config is not None or {"ln_emb", "m_spa"} <= set(pins)
    if sized and not _shape_allows(shape, derived):
        tiny = _tiny_limits()
        raise FocusError(f"{name}: impossible: shape={shape}, but the pinned sizes make every "
                         f"sample {config_shape(derived) or 'tiny or medium'} (tiny: at most "
                         f"{tiny['tables']} tables of {tiny['rows']} rows, width {tiny['width']}; "
                         f"large: a table past 2^24 rows): drop shape= or change the sizes")
    if config is not None:
        kept = [f.name for f in dataclasses.fields(derived)
                if not neighbours or f.name in STRUCTURE - {"schema"} or f.name in pins]
        if neighbours and isinstance(derived.m_spa, tuple):
            kept.append("md_flag")
        pins = {f: getattr(derived, f) for f in kept}
    return Focus(tuple(pins.items()), inputs, shape, name)


def _digest(config: DLRMConfig | None) -> str:
    """A short name for a config in a label: its tables and widths."""
    if config is None:
        return ""
    return f"{config.num_tables} tables, m_spa={config.m_spa}, ln_bot={list(config.ln_bot)}"
