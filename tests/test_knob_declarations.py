"""A DLRM knob is declared once, on its ``DLRMConfig`` field (issue 21):
validation, ``Sample.features()``, ablation, coverage, repairs, the matrix's
rows and the strategies' draws all read ``fuzz.model.config.KNOBS``, so a new
knob or value is one edit of the config (and its code path in the model).

Shown three ways: every field but the sizes is a declared knob and each
derived name is what its declaration gives; changing a declaration (a value
added, a feature given) changes every derived name at once, with no other
edit; and no module but the declaration and the model's code path spells a
list of knob values or knob names. Unit tier: no compiler, no workers."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from fuzz.engine.coverage import knob_values
from fuzz.model.config import KNOBS, STRUCTURE, DLRMConfig, InvalidConfig, Knob, config_with, knobs
from fuzz.model.sample import Sample
from fuzz.regress.matrix import FEATURES, feature_rows, feature_sample
from fuzz.triage import ablate, repair
from strategies import dlrm_configs
from strategies.configs import _the_rest
from strategies.draw import draw_samples
from tests.helpers import tiny_config

ROOT = Path(__file__).resolve().parents[1]
# Where knob values may be spelled: the declaration, and the model's code path
# (how each value computes: torch dtypes, unit roundoffs, quantization modes).
SPELLED_IN = {"fuzz/model/config.py", "fuzz/model/dlrm.py", "fuzz/model/rounding.py"}


def _on(declared: Knob, value: Any) -> Sample:
    """The matrix's minimal model with ``declared`` at ``value`` (its switch
    and the settings it needs as declared), as the matrix builds its rows."""
    config = config_with(feature_sample("plain", 0).config, **declared.changes(value))
    assert config is not None, f"{declared.name}={value!r} gives no valid config"
    return feature_sample("plain", 0, config)


def _turned_on() -> list[tuple[Knob, Any]]:
    """Every knob with each value that switches it on (the default, too, of a
    knob behind a switch)."""
    return [(declared, value) for declared in KNOBS.values() for value in declared.turned_on()]


def test_every_field_but_the_sizes_is_a_declared_knob() -> None:
    fields = dataclasses.fields(DLRMConfig)
    assert STRUCTURE == {"m_spa", "ln_emb", "ln_bot", "ln_top", "schema"}
    assert list(KNOBS) == [f.name for f in fields if f.name not in STRUCTURE]
    assert knobs() == {f.name: f.default for f in fields if f.name in KNOBS}
    for declared in KNOBS.values():
        assert declared.values is None or declared.values[0] == declared.default, declared.name


@pytest.mark.parametrize("name", [n for n, k in KNOBS.items() if k.valued])
def test_the_config_takes_exactly_the_declared_values(name: str) -> None:
    for value in KNOBS[name].choices:
        assert config_with(tiny_config(), **{name: value}) is not None, value
    with pytest.raises(InvalidConfig, match=re.escape(f"must be one of {list(KNOBS[name].choices)}")):
        tiny_config(**{name: "no-such-value"})


@pytest.mark.parametrize("declared, value", _turned_on(),
                         ids=[f"{k.name}={v}" for k, v in _turned_on()])
def test_every_name_of_a_knob_value_is_what_its_declaration_gives(declared: Knob,
                                                                  value: Any) -> None:
    sample = _on(declared, value)
    if declared.feature is not None:
        feature = declared.show(value)
        assert feature in sample.features()
        if not declared.always:
            off = repair.switch_off(sample, feature)
            assert off is not None and feature not in off.features()
    if value != declared.default:
        assert (f"{declared.name}={value}" if len(declared.values or ()) > 2
                else declared.name) in ablate.features(sample)
    if declared.coverage is not None:
        label = declared.coverage_label or declared.name
        assert [row for row in knob_values(sample) if row.startswith(f"{label}=")]
    for label, changes in declared.matrix_rows().items():
        assert FEATURES[label] == changes


def test_the_matrix_is_the_declared_rows_and_nothing_else() -> None:
    assert FEATURES == feature_rows()
    declared_rows = {label for k in KNOBS.values() for label in k.matrix_rows()}
    assert set(FEATURES) - declared_rows == {"plain", "empty_bags"}


def test_the_strategies_draw_every_declared_value() -> None:
    wanted = {(name, value) for name, declared in KNOBS.items() for value in declared.values or ()}
    drawn = {(name, getattr(sample.config, name)) for sample in draw_samples(80, seed=0)
             for name in KNOBS}
    assert wanted - drawn == set()


def test_a_knob_no_hand_written_draw_decides_is_drawn_from_its_declaration() -> None:
    """What a knob declared without a draw in ``strategies/configs.py`` gets:
    its declared values, kept where the config can run them."""
    @st.composite
    def undecided(draw: Any, name: str, base: DLRMConfig) -> DLRMConfig:
        return _the_rest(draw, base, set(KNOBS) - {name})

    found = find(undecided("dtype", tiny_config()), lambda c: c.dtype == "bfloat16",
                 settings=settings(database=None))
    assert found.dtype == "bfloat16"
    quantized = tiny_config(quantize_bits=8)  # runs float32 only
    assert find(undecided("dtype", quantized), lambda c: True,
                settings=settings(database=None)) == quantized
    with pytest.raises(NoSuchExample):
        find(undecided("dtype", quantized), lambda c: c.dtype != "float32",
             settings=settings(database=None, max_examples=50))


def test_a_value_added_to_a_declaration_is_validated_drawn_and_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pooling = KNOBS["pooling"]
    monkeypatch.setitem(KNOBS, "pooling", dataclasses.replace(
        pooling, values=(*pooling.choices, "median")))
    sample = _on(KNOBS["pooling"], "median")
    assert "pooling=median" in sample.features()
    assert "pooling=median" in ablate.features(sample)
    assert "pooling=median" in knob_values(sample)
    assert feature_rows()["pooling=median"] == {"pooling": "median"}
    found = find(dlrm_configs(), lambda c: c.pooling == "median",
                 settings=settings(max_examples=500, database=None))
    assert found.pooling == "median"


def test_a_feature_given_to_a_knob_shows_everywhere_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KNOBS, "weights", dataclasses.replace(
        KNOBS["weights"], feature="weight_form", coverage_label="program_weights"))
    sample = _on(KNOBS["weights"], "inputs")
    assert "weight_form=inputs" in sample.features()
    assert "program_weights=inputs" in knob_values(sample)
    assert feature_rows()["weight_form=inputs"] == {"weights": "inputs"}
    off = repair.switch_off(sample, "weight_form=inputs")
    assert off is not None and off.config.weights == "inline"


def _constant_groups(node: ast.AST) -> list[list[Any]]:
    """The constants a literal holds, as the scan reads them: a tuple, list,
    set or ``Literal[...]`` made of constants only; a dict's constant keys,
    and its constant keys and values together (``{"qr_operation": "qr_flag"}``)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        if all(isinstance(e, ast.Constant) for e in node.elts):
            return [[e.value for e in node.elts if isinstance(e, ast.Constant)]]
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        return [keys, [*keys, *(v.value for v in node.values if isinstance(v, ast.Constant))]]
    return []


def _spells_a_knob(values: list[Any]) -> str | None:
    """What ``values`` lists, if it is two or more knob names, or two or more
    values of one choice knob (true/false aside)."""
    if sum(isinstance(v, str) and v in KNOBS for v in values) >= 2:
        return "knob names"
    for name, declared in KNOBS.items():
        allowed = [repr(v) for v in declared.values or () if not isinstance(v, bool)]
        if declared.valued and len(set(map(repr, values))) >= 2 \
                and all(repr(v) in allowed for v in values):
            return f"values of {name}"
    return None


def _spelled(source: str) -> list[tuple[int, str]]:
    """Each literal of ``source`` that spells knob values or names, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = next((w for group in _constant_groups(node) if (w := _spells_a_knob(group))), None)
        if what is not None:
            found.append((getattr(node, "lineno", 0), what))
    return found


def test_no_other_module_spells_knob_values_or_names() -> None:
    spelled = [f"{where}:{line} {what}"
               for package in ("fuzz", "strategies", "oracles")
               for path in sorted((ROOT / package).rglob("*.py"))
               if (where := str(path.relative_to(ROOT))) not in SPELLED_IN
               for line, what in _spelled(path.read_text())]
    assert spelled == []


def test_the_scan_sees_a_table_of_knob_values_or_names() -> None:
    source = ('MODES = ("mean", "max")\nSIZES = {"qr_threshold": 1, "md_threshold": 2}\n'
              'WIDTHS = [8, 4]\nONLY_WITH = {"qr_operation": "qr_flag"}\n'
              'FLAGS = (True, False)\nSHAPES = ("tiny", "large")\n')
    assert _spelled(source) == [(1, "values of pooling"), (2, "knob names"),
                                (3, "values of quantize_bits"), (4, "knob names")]
