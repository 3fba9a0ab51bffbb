"""Pydantic validation errors as the one line a user sees: ``file: field.path: message``."""

from __future__ import annotations

from pydantic import ValidationError


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
