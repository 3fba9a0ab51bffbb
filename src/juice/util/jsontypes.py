"""The types of JSON as ``json.load`` returns it and ``json.dump`` takes it: what result
files (manifests, iteration records, Rally files, SLA verdicts) and REST bodies hold.

``JSONValue`` is recursive and exact: code that reads a field narrows it (``isinstance``,
``as_object``/``as_list``) before use, so a file of an unexpected shape is caught where it is
read instead of deep inside a computation. ``JSONObject`` is one JSON object (``{...}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import SupportsFloat, SupportsIndex, TypeAlias

JSONScalar: TypeAlias = "str | int | float | bool | None"
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
JSONObject: TypeAlias = "dict[str, JSONValue]"


def as_object(value: object) -> JSONObject:
    """``value`` when it is a JSON object, else ``{}`` (a missing or malformed field)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[JSONValue]:
    """``value`` when it is a JSON array, else ``[]``."""
    return value if isinstance(value, list) else []


def as_objects(value: object) -> list[JSONObject]:
    """The JSON objects of the array ``value`` (other entries and non-arrays: dropped)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def as_float(value: object) -> float | None:
    """A JSON number as float (bools are not numbers here); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def to_float(value: object) -> float:
    """``float(value)`` for what ``float()`` takes (numbers, numeric text), raising as it does
    otherwise: for fields read as ``float(x)`` before they had a type."""
    if isinstance(value, str | SupportsFloat | SupportsIndex):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not '{type(value).__name__}'")


def as_str(value: object, default: str = "") -> str:
    """A JSON string, else ``default``."""
    return value if isinstance(value, str) else default


def get_in(obj: Mapping[str, object], *keys: str) -> object:
    """``obj[k1][k2]...``; None as soon as a level is missing or not an object."""
    cur: object = obj
    for k in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(k)
    return cur
