"""Names of the ops in an exported program, the way buckets, localization
and repros name a culprit: ``aten.<op>.<overload>[switches]``, where the
switches are the arguments that pick a lowering (present optional tensors,
bools and strings away from their default, enum ints). One naming for the
localizer that finds an op and the repro that cuts the same op out again.
"""

from __future__ import annotations

from typing import Any

__all__ = ["culprit_name"]

_ENUM_INTS = frozenset({"mode", "reduction"})


def culprit_name(node: Any) -> str:
    """``aten.<op>.<overload>[switches]`` for the op that produced ``node`` (a
    ``getitem`` names the multi-output op it reads). Switches are the
    arguments that select a lowering: optional tensors that are present, bools
    and strings away from their default, non-zero enum ints (``mode=1``);
    never dims, sizes or values that vary with the sample."""
    import operator

    if node.target is operator.getitem:
        node = node.args[0]
    schema = getattr(node.target, "_schema", None)
    name = str(node.target) if schema is not None else getattr(node.target, "__name__", str(node.target))
    if schema is None:
        return name
    switches = [s for s in (_switch(arg, value) for arg, value in _bound(schema, node)) if s]
    return f"{name}[{','.join(switches)}]" if switches else name


def _bound(schema: Any, node: Any) -> list[tuple[Any, Any]]:
    """(schema argument, value) for every argument the node passes."""
    pairs = list(zip(schema.arguments, node.args))
    pairs += [(arg, node.kwargs[arg.name]) for arg in schema.arguments[len(node.args):]
              if arg.name in node.kwargs]
    return pairs


def _switch(arg: Any, value: Any) -> str:
    import torch

    kind = arg.type
    default = arg.default_value if arg.has_default_value() else None
    if isinstance(kind, torch.OptionalType):
        if value is None:
            return ""
        inner = kind.getElementType()
        if isinstance(inner, (torch.StringType, torch.BoolType)):
            return _switch_value(arg.name, value, default)
        return arg.name  # present: a code path; its value (a row, a bound) is data
    if isinstance(kind, torch.BoolType):
        return _switch_value(arg.name, bool(value), bool(default))
    if isinstance(kind, torch.StringType):
        return _switch_value(arg.name, value, default)
    if isinstance(kind, torch.IntType) and arg.name in _ENUM_INTS and value:
        return f"{arg.name}={value}"
    return ""


def _switch_value(name: str, value: Any, default: Any) -> str:
    if value == default:
        return ""
    if value is True:
        return name
    return f"{name}={value}"
