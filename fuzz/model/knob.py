"""The declaration of one DLRM knob (``Knob``) and how a ``DLRMConfig`` field
carries it (``field(metadata=knob(...))``): everything dlrm-fuzz derives from a
knob (validation, feature names, ablation, coverage, matrix rows, the
strategies' choices) reads this one record, so a new knob is one field of
``fuzz.model.config`` and its code path in ``fuzz.model.dlrm``. Apart from the
config so that the config module holds the hyperparameters and their rules."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["Configured", "Knob", "allowed_values", "knob"]



class Configured(Protocol):
    """What a knob reads of a ``DLRMConfig`` beyond its fields (read by name):
    a protocol, so that the declaration type needs nothing of the config it
    declares (no import circle between knob.py and config.py)."""

    @property
    def num_tables(self) -> int:
        """How many embedding tables the config has."""

    def table_kind(self, k: int) -> str:
        """Which code path table ``k`` takes."""

@dataclass(frozen=True)
class Knob:
    """Everything dlrm-fuzz knows about one ``DLRMConfig`` knob, declared once
    on its field (``field(default=..., metadata=knob(...))``) and read from
    ``KNOBS`` by whatever validates, names, draws, counts or switches knobs,
    so that a new knob is one field of ``fuzz.model.config`` (and its code path
    in ``dlrm.py``).

    ``name``, ``default`` and ``values`` come from the field: the allowed
    values, default first, are the field's ``Literal`` annotation (``| None``
    included), ``(False, True)`` for a ``bool``, or given as ``values=`` for a
    type that cannot say them; ``None`` for an open setting (an int, a float).

    ``path``: the table kind (``table_kind``) whose code the knob sets (the
    strategies draw it with that path only). ``Sample.features()`` shows the
    knob as ``feature`` (``feature=value`` for a choice of more than
    true/false): when it is away from its default, always with ``always``,
    only while ``feature_when`` (field, value) holds, and for a ``path`` when
    some table takes that path, whatever the value. ``switch``: the flag without which the knob means
    nothing (coverage counts it only with the flag on, the matrix and repairs
    switch the flag). Ablation switches every knob back to its default, named
    ``name=value`` when it has more than two values, else ``name``.
    ``coverage``: how the end-of-campaign table counts it (``value``:
    ``name=value``; ``on/off``: away from the default or not; ``set``: a
    value given or not; ``None``: a size, not counted), as ``coverage_label``
    when given. ``matrix``: whether ``dlrm-fuzz matrix`` has rows for it
    (``None``: when it is a feature; a string: the label of its one row),
    one per value that turns it on (``example`` for an open setting; with a
    ``switch``, every value, the switch on), with ``matrix_with`` set too.
    ``extension``: beyond ``DLRM_Net``'s constructor (the matrix lists
    upstream's own knobs, then the input rows, then these)."""

    name: str = ""
    default: Any = None
    values: tuple[Any, ...] | None = None
    feature: str | None = None
    always: bool = False
    feature_when: tuple[str, Any] | None = None
    path: str | None = None
    switch: str | None = None
    coverage: Literal["value", "on/off", "set"] | None = "value"
    coverage_label: str | None = None
    matrix: bool | str | None = None
    example: Any = None
    matrix_with: tuple[tuple[str, Any], ...] = ()
    extension: bool = False

    @property
    def valued(self) -> bool:
        """Whether the knob is named with its value: a choice beyond true/false."""
        return self.values is not None and self.values != (False, True)

    @property
    def choices(self) -> tuple[Any, ...]:
        """The allowed values of a choice knob, default first (``TypeError`` for
        an open setting, which has none to list)."""
        if self.values is None:
            raise TypeError(f"{self.name} is an open setting: it has no list of values")
        return self.values

    @property
    def others(self) -> tuple[Any, ...]:
        """The allowed values but the default (empty for an open setting)."""
        return tuple(v for v in self.values or () if v != self.default)

    def show(self, value: Any) -> str:
        """How ``value`` of this knob reads as a feature (or matrix row)."""
        label = self.feature or self.name
        return f"{label}={value}" if self.valued else label

    def feature_of(self, config: Configured) -> str | None:
        """The string this knob adds to ``Sample.features()`` for ``config``, if any."""
        if self.feature is None:
            return None
        if self.feature_when is not None \
                and getattr(config, self.feature_when[0]) != self.feature_when[1]:
            return None
        value = getattr(config, self.name)
        if self.path is not None:
            on = any(config.table_kind(k) == self.path for k in range(config.num_tables))
        else:
            on = self.always or value != self.default
        return self.show(value) if on else None

    def turned_on(self) -> tuple[Any, ...]:
        """The values that switch the knob on, one matrix row each."""
        if self.values is None:
            return () if self.example is None else (self.example,)
        return self.values if self.switch is not None else self.others

    def changes(self, value: Any) -> dict[str, Any]:
        """The config changes that put the matrix's minimal model at ``value``
        of this knob: the knob, its switch on, ``matrix_with``."""
        return {self.name: value, **({self.switch: True} if self.switch else {}),
                **dict(self.matrix_with)}

    def matrix_rows(self) -> dict[str, dict[str, Any]]:
        """This knob's rows of ``dlrm-fuzz matrix``: label -> config changes."""
        if self.matrix is False or (self.matrix is None and self.feature is None):
            return {}
        return {self.matrix if isinstance(self.matrix, str) else self.show(value):
                self.changes(value) for value in self.turned_on()}


def knob(**declared: Any) -> dict[str, Knob]:
    """A field's knob declaration, as ``field(metadata=knob(...))`` takes it
    (the arguments are ``Knob``'s; name, default and, from the annotation,
    values are filled in by ``KNOBS``)."""
    return {"knob": Knob(**declared)}


def allowed_values(hint: Any, declared: Knob, default: Any) -> tuple[Any, ...] | None:
    """A knob's allowed values, default first: declared, or read off its
    annotation (a ``Literal``, optionally ``| None``; ``bool``)."""
    if declared.values is not None:
        return declared.values
    if hint is bool:
        return (False, True)
    parts = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) \
        else (hint,)
    values: list[Any] = []
    for part in parts:
        if typing.get_origin(part) is Literal:
            values.extend(typing.get_args(part))
        elif part is type(None):
            values.append(None)
        else:
            return None  # an open setting: an int, a float, an optional index
    return (default, *(v for v in values if v != default))
