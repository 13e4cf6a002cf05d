"""Filling a repro template: every ``repro.py`` is one of the files in
``templates/`` (``single_op.py``, ``op_failure.py``, ``model.py``, over the
parts they include: ``prelude.py``, ``attempt.py``, ``vulkan_host.py``),
valid Python that mypy and a linter read as it stands (mypy checks them with
the rest of ``fuzz``; they are never imported). The writer fills named slots
only, marked in comments:

- ``NAME = <stand-in>  # [comment ]@value: key``: the constant, ``repr`` of the
  slot's value (the comment stays, the stand-in's annotation goes);
- ``<stand-in>  # @code: key``: the line replaced by the slot's lines (code
  generated from the exported program), at the stand-in's indentation;
- ``# @if: key`` ... ``# @end: key``: a section kept when the slot is True;
- ``from .part import name  # @include``: the part's text, filled the same way;
- ``${key}``, inside a string or a comment: the slot's text;
- ``...  # @stub``: a line only the type checker needs (a name the filled
  script defines elsewhere); ``#|`` lines are notes on the template. Both go.

A slot a template names but the fill lacks, or a fill that is not valid
Python, is a bug of ours and raises."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Mapping, Sequence

__all__ = ["TEMPLATES", "MARKERS", "fill", "template_text"]


# The folder of the templates, inside this package (shipped as package data).
TEMPLATES = "templates"

# What no filled script may still hold.
MARKERS = re.compile(r"#[^\n]*@(?:value|code|include|stub)\b|#\s*@(?:if|end):|\$\{\w+\}|^\s*#\|",
                     re.MULTILINE)

_SECTION = re.compile(r"^\s*#\s*@(if|end):\s*(\w+)\s*$")
_MARKED = re.compile(r"^(?P<indent>\s*)(?P<code>.*\S)\s+#(?P<comment>[^#]*?)\s*"
                     r"@(?P<kind>value|code|include|stub)(?::\s*(?P<key>\w+))?\s*$")
_NAME = re.compile(r"^(\w+)\s*(?::[^=]+)?=")
_PART = re.compile(r"^from \.(\w+) import ")
_TOKEN = re.compile(r"\$\{(\w+)\}")


@lru_cache(maxsize=None)
def template_text(name: str) -> str:
    """A template's text as shipped (``templates/<name>.py``)."""
    return resources.files(__package__).joinpath(TEMPLATES, f"{name}.py").read_text()


def fill(name: str, slots: Mapping[str, object]) -> str:
    """Template ``name`` with its slots filled: the script text, checked to be
    valid Python with no marker left."""
    text = "\n".join(_fill_lines(name, slots)) + "\n"
    left = MARKERS.search(text)
    if left:
        raise ValueError(f"template {name!r}: marker {left.group(0)!r} left in the filled script")
    compile(text, f"<repro template {name}>", "exec")
    return text


def _fill_lines(name: str, slots: Mapping[str, object]) -> list[str]:
    """The filled lines of one template (or part)."""
    out: list[str] = []
    skipping: list[str] = []  # the open sections, outermost first, that are dropped
    opened: list[str] = []
    for number, line in enumerate(template_text(name).splitlines(), 1):
        where = f"templates/{name}.py:{number}"
        section = _SECTION.match(line)
        if section:
            kind, key = section.groups()
            if kind == "if":
                opened.append(key)
                if skipping or not _flag(slots, key, where):
                    skipping.append(key)
            else:
                if not opened or opened.pop() != key:
                    raise ValueError(f"{where}: '@end: {key}' closes no open '@if: {key}'")
                if skipping and skipping[-1] == key:
                    skipping.pop()
            continue
        if skipping or line.lstrip().startswith("#|"):
            continue
        line = _TOKEN.sub(lambda found: str(_slot(slots, found.group(1), where)), line)
        marked = _MARKED.match(line)
        if marked is None:
            out.append(line)
            continue
        out += _marked(marked, slots, where)
    if opened:
        raise ValueError(f"templates/{name}.py: '@if: {opened[-1]}' never ends")
    return out


def _marked(marked: re.Match[str], slots: Mapping[str, object], where: str) -> list[str]:
    """A marked line filled: a constant, code lines, an included part, or nothing (a stub)."""
    indent, code, kind, key = marked["indent"], marked["code"], marked["kind"], marked["key"]
    if kind == "stub":
        return []
    if kind == "include":
        part = _PART.match(code)
        if part is None:
            raise ValueError(f"{where}: '@include' marks a 'from .<part> import ...' line")
        return [indent + line if line else line for line in _fill_lines(part.group(1), slots)]
    if key is None:
        raise ValueError(f"{where}: '@{kind}' needs a slot name ('@{kind}: name')")
    value = _slot(slots, key, where)
    if kind == "code":
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ValueError(f"{where}: slot {key!r} fills code: pass a list of lines")
        return [indent + str(line) if line else "" for line in value]
    target = _NAME.match(code)
    if target is None:
        raise ValueError(f"{where}: '@value' marks a 'NAME = ...' line")
    comment = marked["comment"].strip()
    return [f"{indent}{target.group(1)} = {value!r}" + (f"  # {comment}" if comment else "")]


def _slot(slots: Mapping[str, object], key: str, where: str) -> object:
    if key not in slots:
        raise KeyError(f"{where}: the template's slot {key!r} is not filled")
    return slots[key]


def _flag(slots: Mapping[str, object], key: str, where: str) -> bool:
    value = _slot(slots, key, where)
    if not isinstance(value, bool):
        raise ValueError(f"{where}: section {key!r} is kept or dropped by a bool, not {value!r}")
    return value
