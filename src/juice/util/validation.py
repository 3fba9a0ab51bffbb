"""Pydantic validation errors as the one line a user sees: ``file: field.path: message``;
and the same checks for command-line options (``check_option``): ``--option: message``."""

from __future__ import annotations

import math
import re
from typing import TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from juice.errors import UserError

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# pydantic error types whose message is better with the offending value shown
_SHOW_INPUT = {"int_type", "float_type", "bool_type", "string_type", "list_type", "dict_type",
               "model_type", "model_attributes_type", "finite_number", "literal_error",
               "greater_than", "greater_than_equal", "less_than", "less_than_equal",
               "int_from_float", "string_pattern_mismatch", "enum", "too_short", "too_long",
               "string_too_long", "string_too_short", "union_tag_invalid"}
_BOUND = {"greater_than": (">", "gt"), "greater_than_equal": (">=", "ge"), "less_than": ("<", "lt"),
          "less_than_equal": ("<=", "le")}
_TYPE_TEXT = {"int_type": "expected an integer", "float_type": "expected a number",
              "bool_type": "expected true or false", "string_type": "expected a string",
              "list_type": "expected a list", "dict_type": "expected a mapping",
              "model_type": "expected a mapping", "model_attributes_type": "expected a mapping",
              "finite_number": "expected a finite number"}
_PATH_PREFIX = re.compile(r"^([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*): ")


def validate(model: type[M], data: object, source: str, *, expected: str, unknown_key_hint: str) -> M:
    """``model`` validated from ``data``, or a one-line UserError naming ``source`` and the field.

    ``expected`` says what the file should hold when it is not a mapping at all."""
    if not isinstance(data, dict):
        raise UserError(f"{source or 'spec'}: expected {expected}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise UserError(one_line(e, source, unknown_key_hint, data)) from None


def one_line(e: ValidationError, source: str, unknown_key_hint: str, data: object = None) -> str:
    """The first error of ``e``, naming ``source`` (a file, or "" for none) and the field path.

    ``unknown_key_hint`` replaces pydantic's text for a key the model forbids (say where the
    format is documented). When there are more errors, their count is appended. With ``data``
    (what was validated), the path is the one in the user's data: pydantic's names of union
    members (``list[int]``, ``NodeRange``...) are left out."""
    errors = e.errors()
    first = errors[0]
    loc = ".".join(_clean(x) for x in user_path(first["loc"], data, first["type"] == "missing"))
    msg = _clean(first["msg"].removeprefix("Value error, "), 600)
    kind = first["type"]
    if kind == "extra_forbidden":
        msg = f"unknown key ({unknown_key_hint})"
    elif kind == "missing":
        msg = "required field is missing"
    elif kind in _BOUND and isinstance(first.get("ctx"), dict) and _BOUND[kind][1] in first["ctx"]:
        op, key = _BOUND[kind]
        msg = f"must be {op} {shown(first['ctx'][key])}, got {shown(first.get('input'))}"
    elif kind in _SHOW_INPUT:
        msg = f"{_TYPE_TEXT.get(kind, msg)}, got {shown(first.get('input'))}"
    m = _PATH_PREFIX.match(msg)
    if m and loc and kind == "value_error":  # a model validator naming a field below its model
        loc, msg = f"{loc}.{m.group(1)}", msg[m.end():]
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    where = f"{source}: " if source else ""
    return f"{where}{loc + ': ' if loc else ''}{msg}{more}"


def user_path(loc: tuple[int | str, ...], data: object, missing: bool = False) -> list[int | str]:
    """``loc`` without the parts that are not keys or indices of ``data`` (union member tags,
    ``[key]`` markers); unchanged when ``data`` is None. With ``missing`` (the error is a
    missing key) the last part stays."""
    if data is None:
        return list(loc)
    out: list[int | str] = []
    cur: object = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(cur, dict) and part in cur:  # noqa: SIM114 (two branches: two narrowings)
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif missing and last and isinstance(cur, dict):
            out.append(part)  # a missing key
        else:
            continue  # a tag pydantic added, not part of the user's data
    return out


def shown(v: object) -> str:
    """A value as the user wrote it in YAML, short and on one line."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        return f"{v:g}"
    if isinstance(v, int):
        s = str(v) if abs(v) < 10**15 else f"{float(v):g}"
        return s
    if isinstance(v, str):
        return _clean(repr(v), 60)
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list | tuple):
        return "a list"
    return f"a {type(v).__name__}"


def _clean(x: object, limit: int = 80) -> str:
    """``x`` as text on one line (control characters escaped), at most ``limit`` characters."""
    s = str(x)
    if not s.isprintable():
        s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def check_option(option: str, value: T, adapter: TypeAdapter[T]) -> T:
    """``value`` of a command-line ``option`` validated by ``adapter`` (e.g. one of the
    annotated types of ``juice.spec.base`` with its bounds), or a one-line UserError naming
    the option: typer/click accept ``nan`` and ``inf`` for a float option."""
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        msg = one_line(e, "", "unknown key")
        if isinstance(value, float) and not math.isfinite(value):  # as typed, not as YAML
            msg = msg.replace(f"got {shown(value)}", f"got {value}")
        raise UserError(f"{option}: {msg}") from None
