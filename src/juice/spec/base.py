"""What every spec shares: the strict pydantic base, the bounded number types, the name
pattern, reading YAML.

Every model of every spec (lab, Keystone experiment, WAN axis, scheduler-db) derives from
:class:`Strict` and types its numbers with the annotated types below, so the same rules hold
everywhere:

- no NaN, no infinity (``allow_inf_nan=False``);
- no bool for a number (``true`` is not 1) and no string for a number (``"5"`` is not 5): the
  types are pydantic *strict* types; an int is accepted where a float is expected (and stored
  as a float, so ``delay_ms: 50`` and ``delay_ms: 50.0`` are the same value and the same run
  key), a float is not accepted for an int;
- every number has a lower and an upper bound that make physical sense. The shared bounds:

  ====================  ==================  ====================================================
  type                  range               why
  ====================  ==================  ====================================================
  ``OneWayMs``          0 .. 10,000 ms      one-way delay of a link. The longest real paths are
                                            ~300 ms one-way (a geostationary satellite hop);
                                            10 s is 30x that, and beyond it TCP's retries and
                                            the services' own timeouts fail a run instead of
                                            measuring it
  ``JitterMs``          0 .. 10,000 ms      standard deviation of the delay: the same range as
                                            the delay it shakes
  ``Percent``           0 .. 100 %          packet loss (100 % = a cut link)
  ``SiteCount``         1 .. 250            sites of a lab (one /24 and one namespace per site;
                                            250 keeps every address in range)
  ``Seed``              0 .. 2**31-1        fits every RNG (Python, numpy, 32-bit C)
  ``Repetitions``       1 .. 1,000          repetitions of a run or a read
  ``PositiveInt``       >= 1                counts; each field adds its own upper bound
  ``NonNegativeInt``    >= 0                idem
  ``Seconds``           >= 0 s, finite      durations; each field adds its own bounds
  ====================  ==================  ====================================================

Field-specific bounds are stated in each field's description and in each spec module's doc.
They go INSIDE the type, ``Annotated[Seconds, Interval(ge=1, le=86_400)]``, never as
``Field(ge=...)`` on a field whose type already has that bound: pydantic keeps the last bound
of a kind, and the type's comes last.
A whole spec is also bounded: at most ``MAX_RUNS`` runs, and at most ``MAX_PLAN_S`` (30 days)
of work, so the estimate ``juice plan`` prints for a valid spec is finite and sane; a longer
study is several specs. The work is counted with the estimate's own model (each study's spec
module holds a copy: the estimate imports the spec, not the reverse), taken at its most
expensive, so it is an upper bound of the printed estimate (tests/spec/test_bounds.py).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Annotated

import pydantic
import yaml
from annotated_types import Ge, Le
from pydantic import AllowInfNan, BaseModel, ConfigDict

from juice.errors import UserError
from juice.util.validation import shown

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

MAX_DELAY_MS = 10_000.0
MAX_SITES = 250
MAX_SEED = 2**31 - 1
MAX_REPETITIONS = 1000
MAX_RUNS = 10_000
MAX_PLAN_S = 30 * 24 * 3600.0  # 30 days of estimated work in one spec

_STRICT = pydantic.Strict()
_FINITE = AllowInfNan(False)

StrictBool = Annotated[bool, _STRICT]
StrictStr = Annotated[str, _STRICT]
FiniteFloat = Annotated[float, _STRICT, _FINITE]
NonNegativeInt = Annotated[int, _STRICT, Ge(0)]
PositiveInt = Annotated[int, _STRICT, Ge(1)]
Seconds = Annotated[float, _STRICT, _FINITE, Ge(0)]
OneWayMs = Annotated[float, _STRICT, _FINITE, Ge(0), Le(MAX_DELAY_MS)]
JitterMs = Annotated[float, _STRICT, _FINITE, Ge(0), Le(MAX_DELAY_MS)]
Percent = Annotated[float, _STRICT, _FINITE, Ge(0), Le(100)]
SiteCount = Annotated[int, _STRICT, Ge(1), Le(MAX_SITES)]
Seed = Annotated[int, _STRICT, Ge(0), Le(MAX_SEED)]
Repetitions = Annotated[int, _STRICT, Ge(1), Le(MAX_REPETITIONS)]


class Strict(BaseModel):
    """Base of every spec model: unknown keys rejected, immutable, strict types, finite floats
    (the annotated types above say it per field too; this catches a field typed plainly)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def no_duplicates(values: Sequence[Hashable]) -> None:
    """ValueError ``"<i>: <value> is listed twice ..."`` for the first value listed again (on an
    axis a duplicate is the same runs twice). Prefix the field when raising from a model."""
    seen: set[Hashable] = set()
    for i, v in enumerate(values):
        if v in seen:
            shown = str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else repr(v)
            raise ValueError(f"{i}: {shown} is listed twice; give each point once")
        seen.add(v)


def plain_data(v: object, where: str = "", depth: int = 0) -> None:
    """ValueError unless ``v`` is plain YAML data (mappings with string keys, lists, strings,
    bools, ints, finite floats, null) no deeper than 20 levels: what may go into a run key."""
    if depth > 20:
        raise ValueError(f"{where or 'value'}: nested too deep")
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                raise ValueError(f"{where + '.' if where else ''}{k!r}: keys must be strings")
            plain_data(x, f"{where}.{k}" if where else k, depth + 1)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            plain_data(x, f"{where}.{i}" if where else str(i), depth + 1)
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{where or 'value'}: expected a finite number, got {shown(v)}")
    elif v is not None and not isinstance(v, str | int):
        raise ValueError(f"{where or 'value'}: unsupported value of type {type(v).__name__}")


# libyaml's safe loader where PyYAML was built with it (Debian's and PyPI's wheels are): the
# same documents and errors, about 7 times faster than the pure-Python one
SAFE_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, expected: str = "a mapping of keys (name, rdbms, sites, ...)") -> dict[str, object]:
    """The mapping in a YAML spec file, or a one-line UserError naming the file."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such spec file (see examples/ for specs to start from)") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a YAML spec file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a text file (not UTF-8 at byte {e.start}); "
                        f"expected a YAML spec") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        data: object = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as e:
        first = (str(e).splitlines() or ["?"])[0]
        raise UserError(f"{path}: not valid YAML ({first})") from None
    except RecursionError:
        raise UserError(f"{path}: not valid YAML (nested too deep)") from None
    if data is None:
        raise UserError(f"{path}: empty spec, expected {expected}")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected {expected}, got {_kind(data)}")
    return data


def _kind(v: object) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(v), type(v).__name__)
