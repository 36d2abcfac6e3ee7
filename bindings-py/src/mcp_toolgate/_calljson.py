"""The call as the JSON text the engine reads, written so that the engine
decides on exactly the values the tool's handler gets (security review,
issue 11 (3)).

The MCP SDK's JSON reader takes ``1e400``, ``Infinity``, ``-Infinity`` and
``NaN`` as floats; ``json.dumps`` would write them back as ``Infinity`` /
``NaN`` (refused by the engine only by luck) and rewrites other values
(non-string keys become strings, anything else raises). Here:

- ``None``, ``bool``, ``str``, ``int`` (exact digits) and finite ``float``
  are written as ``json.dumps`` writes them (``-0.0`` stays ``-0.0``); ``int``
  and ``str`` subclasses (``IntEnum``, ``StrEnum``) as their value;
- ``inf``, ``-inf`` and ``nan`` are written as ``1e400``, ``-1e400`` and
  ``NaN``: the engine's strict JSON reader refuses them, so the deny decision
  (``BAD_REQUEST``) comes from the engine itself;
- ``dict`` with ``str`` keys, ``list`` and ``tuple``; a pydantic model as the
  object of its fields under their JSON names (``by_alias``), walked the same
  way;
- ``datetime``, ``date``, ``time``, ``timedelta``, ``UUID`` and finite
  ``Decimal`` as pydantic writes them in JSON (the form the tool's own input
  schema describes: a string), ``Enum`` as its value;
- anything else (``bytes``, ``set``, a non-``str`` key, arbitrary objects,
  non-finite ``Decimal``) and nesting deeper than ``MAX_DEPTH`` (the engine
  refuses depth past 128 anyway; this also ends a cycle) is written as the bare
  word ``undefined``, which the engine refuses as it refuses any text that is
  not JSON: a deny with the engine's own decision bytes.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import math
import re
import uuid
from json.encoder import encode_basestring
from typing import Any

REFUSED = "undefined"
MAX_DEPTH = 200
# A surrogate that is not half of a pair: a pair of surrogate code points
# (a str can hold one; no JavaScript string can) stays raw, invalid UTF-8 the
# engine refuses, since its escapes would read as the character they pair to.
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")

_AS_PYDANTIC_JSON = (datetime.datetime, datetime.date, datetime.time, datetime.timedelta, uuid.UUID)


def engine_json(value: Any) -> str:
    """A JSON value written for the engine (see the module doc)."""
    out: list[str] = []
    _write(value, 0, out)
    return "".join(out)


def call_json(name: str, arguments: Any) -> str:
    """``{"name":…,"arguments":…}`` for the engine."""
    out = ['{"name":', _string(name), ',"arguments":']
    _write(arguments, 1, out)
    out.append("}")
    return "".join(out)


def _write(v: Any, depth: int, out: list[str]) -> None:
    t = type(v)
    if t is str:
        out.append(_string(v))
    elif v is None:
        out.append("null")
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int:
        out.append(int.__repr__(v))
    elif t is float:
        out.append(_float(v))
    elif depth >= MAX_DEPTH:
        out.append(REFUSED)
    elif t is dict:
        _object(v, depth, out)
    elif t is list or t is tuple:
        _array(v, depth, out)
    else:
        _other(v, depth, out)


def _string(s: str) -> str:
    """A string as ``json.dumps(ensure_ascii=False)`` writes it, a lone
    surrogate (which UTF-8 cannot carry) as its ``\\udXXX`` escape: as
    JavaScript's ``JSON.stringify`` writes it, so both bindings hand the
    engine the same text (it refuses the escape: BAD_REQUEST)."""
    text = encode_basestring(s)
    if s.isascii():
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _float(v: float) -> str:
    if math.isfinite(v):
        return float.__repr__(v)
    return "NaN" if v != v else ("1e400" if v > 0 else "-1e400")


def _object(v: dict[Any, Any], depth: int, out: list[str]) -> None:
    out.append("{")
    first = True
    for key, item in v.items():
        if not isinstance(key, str):
            out.append(REFUSED)
            return
        if not first:
            out.append(",")
        first = False
        out.append(_string(str.__str__(key)))
        out.append(":")
        _write(item, depth + 1, out)
    out.append("}")


def _array(v: list[Any] | tuple[Any, ...], depth: int, out: list[str]) -> None:
    out.append("[")
    for i, item in enumerate(v):
        if i:
            out.append(",")
        _write(item, depth + 1, out)
    out.append("]")


def _other(v: Any, depth: int, out: list[str]) -> None:
    if isinstance(v, bool):  # pragma: no cover - bool cannot be subclassed
        out.append("true" if v else "false")
    elif isinstance(v, enum.Enum) and not isinstance(v, (int, str, float)):
        _write(v.value, depth + 1, out)
    elif isinstance(v, int):
        out.append(int.__repr__(v))
    elif isinstance(v, float):
        out.append(_float(float(v)))
    elif isinstance(v, str):
        out.append(_string(str.__str__(v)))
    elif isinstance(v, dict):
        _object(v, depth, out)
    elif isinstance(v, (list, tuple)):
        _array(v, depth, out)
    elif isinstance(v, _AS_PYDANTIC_JSON) or (isinstance(v, decimal.Decimal) and v.is_finite()):
        import pydantic_core

        out.append(pydantic_core.to_json(v).decode("utf-8"))
    elif _is_model(v):
        fields = type(v).model_fields
        out.append("{")
        for i, (name, info) in enumerate(fields.items()):
            if i:
                out.append(",")
            out.append(_string(_schema_name(name, info)))
            out.append(":")
            _write(getattr(v, name), depth + 1, out)
        out.append("}")
    else:
        out.append(REFUSED)


def _schema_name(name: str, info: Any) -> str:
    """The key a model field has in its JSON Schema (validation mode, by alias:
    what the catalog's schema constrains), as pydantic names it there: the
    validation alias when it is a key, the first of its choices that is a key,
    the name when it is a path; without one, the alias, else the name. Never
    the serialization alias, which the schema does not name."""
    alias = info.validation_alias
    if alias is None:
        return info.alias or name
    if isinstance(alias, str):
        return alias
    keys = [choice for choice in getattr(alias, "choices", ()) if isinstance(choice, str)]
    return keys[0] if keys else name


def _is_model(v: Any) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover - pydantic comes with mcp
        return False
    return isinstance(v, BaseModel)
