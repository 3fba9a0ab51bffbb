"""Pydantic validation errors as the one line a user sees: ``file: field.path: message``."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from juice.errors import UserError

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, source: str, *, expected: str, unknown_key_hint: str) -> M:
    """``model`` validated from ``data``, or a one-line UserError naming ``source`` and the field.

    ``expected`` says what the file should hold when it is not a mapping at all."""
    if not isinstance(data, dict):
        raise UserError(f"{source or 'spec'}: expected {expected}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise UserError(one_line(e, source, unknown_key_hint)) from None


def one_line(e: ValidationError, source: str, unknown_key_hint: str) -> str:
    """The first error of ``e``, naming ``source`` (a file, or "" for none) and the field path.

    ``unknown_key_hint`` replaces pydantic's text for a key the model forbids (say where the
    format is documented). When there are more errors, their count is appended."""
    errors = e.errors()
    first = errors[0]
    loc = ".".join(str(x) for x in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = f"unknown key ({unknown_key_hint})"
    elif first["type"] == "missing":
        msg = "required field is missing"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    where = f"{source}: " if source else ""
    return f"{where}{loc + ': ' if loc else ''}{msg}{more}"
