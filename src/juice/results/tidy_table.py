"""The tidy table: its columns, how iteration records become one, and how many become one
DataFrame (see ``juice.results.tidy`` for where the records come from).

One row per atomic action per iteration, children included (``depth`` 1, 2... and the name of
their ``parent``); every run parameter is a column, constant over the run's rows, and is also
kept once in the table's metadata (``juice_params``), so readers can skip those columns.

    table = iterations_table("run-1", {"rdbms": "galera"}, records)   # a pyarrow.Table
    df = assemble([split_params(table)])                              # pandas, categoricals

Used by ``juice.results.tidy`` (Juice runs) and ``juice.results.rally_import`` (Rally files);
it depends on neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]  # (no stubs: its types are unchecked)
from pandas.api.extensions import ExtensionArray

TIDY_VERSION = "1"

# The measurement columns, in order; every other column of a tidy table is a run parameter.
MEASURES: tuple[str, ...] = (
    "run", "site", "iteration", "seq", "operation", "parent", "depth", "started_at", "duration_s",
    "action_failed", "iteration_failed", "error_type", "error_message", "timestamp",
    "iteration_duration_s", "latency_s", "dispatch_lag_s",
)
ITERATION_KEY: tuple[str, ...] = ("run", "site", "iteration")
_DICT_COLUMNS = ("run", "operation", "parent", "error_type", "error_message")


def param_columns(df: pd.DataFrame) -> list[str]:
    """The run-parameter columns of a tidy DataFrame (everything that is not a measure)."""
    return [str(c) for c in df.columns if c not in MEASURES]


# --------------------------------------------------------------------------- building rows


def flatten_params(params: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}, "z": [1, 2]}`` -> ``{"a.b": 1, "z": "[1, 2]"}`` (scalars kept)."""
    out: dict[str, object] = {}
    for k, v in params.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten_params(v, f"{key}."))
        elif isinstance(v, list | tuple):
            out[key] = json.dumps(list(v), sort_keys=True)
        else:
            out[key] = v
    return out


def _f(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _error(err: object) -> tuple[bool, str | None, str | None]:
    """Rally's ``error``: [] or [type, message, traceback] (a bare string is tolerated)."""
    if not err:
        return False, None, None
    if isinstance(err, str):
        return True, "Error", err
    if isinstance(err, list | tuple):
        etype = str(err[0]) if len(err) > 0 else "Error"
        msg = str(err[1]) if len(err) > 1 else ""
        return True, etype, msg
    return True, "Error", str(err)


@dataclass
class _Columns:
    """Column-wise accumulator (one list per measure column)."""

    cols: dict[str, list[object]] = field(default_factory=lambda: {m: [] for m in MEASURES})

    def add(self, **row: object) -> None:
        for m in MEASURES:
            self.cols[m].append(row.get(m))

    def __len__(self) -> int:
        return len(self.cols["run"])


def _action_rows(cols: _Columns, base: dict[str, object], actions: Sequence[object]) -> int:
    """Append the rows of ``actions`` (pre-order, children after their parent); returns count."""
    stack: list[tuple[object, str | None, int]] = [(a, None, 0) for a in reversed(actions)]
    seq = 0
    guard = 1_000_000  # a bounded walk, whatever the input
    while stack and guard > 0:
        guard -= 1
        a, parent, depth = stack.pop()
        if not isinstance(a, Mapping):
            continue
        start, end = _f(a.get("started_at")), _f(a.get("finished_at"))
        if start is not None and end is not None:
            dur: float | None = end - start
        else:
            dur = _f(a.get("duration"))
        cols.add(**base, seq=seq, operation=str(a.get("name")), parent=parent, depth=depth,
                 started_at=start, duration_s=dur, action_failed=bool(a.get("failed", False)))
        seq += 1
        kids = a.get("children") or []
        stack.extend((c, str(a.get("name")), depth + 1) for c in reversed(kids))
    return seq


def iterations_table(run: str, params: Mapping[str, object], records: Iterable[Mapping[str, object]]
                     ) -> pa.Table:
    """The tidy ``pyarrow.Table`` of one run: ``records`` are iteration dicts as in
    ``iterations.jsonl`` (``atomic_actions`` in Rally's list form)."""
    cols = _Columns()
    for rec in records:
        failed, etype, emsg = _error(rec.get("error"))
        site, index = rec.get("site"), rec.get("index", 0) or 0
        base: dict[str, object] = {
                "run": run, "site": int(site) if isinstance(site, int | float) else 0,
                "iteration": int(index) if isinstance(index, int | float | str) else 0,
                "iteration_failed": failed, "error_type": etype, "error_message": emsg,
                "timestamp": _f(rec.get("timestamp")),
                "iteration_duration_s": _f(rec.get("duration")),
                "latency_s": _f(rec.get("latency")), "dispatch_lag_s": _f(rec.get("dispatch_lag"))}
        acts = rec.get("atomic_actions") or []
        if _action_rows(cols, base, acts if isinstance(acts, list | tuple) else []) == 0:
            # no atomic action at all (failed before the first one, or a scenario without
            # actions): one row so the iteration is counted
            cols.add(**base, seq=0, operation=None, parent=None, depth=0, started_at=None,
                     duration_s=None, action_failed=failed)
    return _to_arrow(cols, flatten_params(params))


_TYPES: dict[str, pa.DataType] = {
    "site": pa.int32(), "iteration": pa.int64(), "seq": pa.int32(), "depth": pa.int16(),
    "action_failed": pa.bool_(), "iteration_failed": pa.bool_(),
}


def _param_names(params: Mapping[str, object]) -> dict[str, object]:
    """Parameters as columns: a parameter named like a measure becomes ``param.<name>``."""
    return {(f"param.{k}" if k in MEASURES else k): v for k, v in params.items()}


def _to_arrow(cols: _Columns, params: Mapping[str, object]) -> pa.Table:
    n = len(cols)
    arrays: dict[str, pa.Array] = {}
    params = _param_names(params)
    for name, value in params.items():
        arr = pa.array([value] * n) if n else pa.array([], type=pa.null())
        if pa.types.is_string(arr.type):
            arr = arr.dictionary_encode()
        arrays[name] = arr
    for m in MEASURES:
        if m in _DICT_COLUMNS:
            arrays[m] = pa.array(cols.cols[m], type=pa.string()).dictionary_encode()
        else:
            arrays[m] = pa.array(cols.cols[m], type=_TYPES.get(m, pa.float64()))
    table = pa.table(arrays)
    # the parameters again, once, so readers can skip the constant columns (see load)
    return table.replace_schema_metadata({"juice_tidy_version": TIDY_VERSION,
                                          "juice_params": json.dumps(params, default=str)})



def split_params(table: pa.Table) -> tuple[pa.Table, dict[str, object]]:
    """``(measure columns only, parameters)`` of a tidy table (parameters from its metadata,
    else from the first row of its parameter columns)."""
    meta = table.schema.metadata or {}
    if b"juice_params" in meta:
        params = json.loads(meta[b"juice_params"])
    else:
        params = {c: (table.column(c)[0].as_py() if table.num_rows else None)
                  for c in table.column_names if c not in MEASURES}
    return table.select(list(MEASURES)).replace_schema_metadata(None), params


# ---------------------------------------------------------------------------------- frames

# a run-constant parameter column, as assemble builds it
ParamColumn: TypeAlias = ("pd.Categorical | ExtensionArray | npt.NDArray[np.bool_] | npt.NDArray[np.int64] "
                          "| npt.NDArray[np.float64]")


def to_frame(table: pa.Table) -> pd.DataFrame:
    """A tidy ``pyarrow.Table`` as pandas: dictionary strings become categoricals."""
    df: pd.DataFrame = table.to_pandas(split_blocks=True)
    for c in df.columns:
        if df[c].dtype == object and c not in ("error_message",):
            df[c] = df[c].astype("category")
    return df


def _param_column(values: Sequence[object], lengths: npt.NDArray[np.int64]) -> ParamColumn:
    """One run-constant column: categorical for text, numeric when every value is a number
    (float when some are NULL), object otherwise."""
    present = [v for v in values if v is not None]
    n = int(lengths.sum())
    if not present:
        return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8),  # type: ignore[arg-type]
                                         categories=pd.Index([], dtype=object))
    if all(isinstance(v, bool) for v in present):
        if len(present) == len(values):
            return np.repeat(np.array(values, dtype=bool), lengths)
        return pd.array(np.repeat(np.array(values, dtype=object), lengths),  # type: ignore[arg-type]
                        dtype="boolean")
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        if len(present) == len(values) and all(isinstance(v, int) for v in present):
            return np.repeat(np.array(values, dtype=np.int64), lengths)
        return np.repeat(np.array([np.nan if v is None else v for v in values], dtype=np.float64), lengths)
    if all(isinstance(v, str) for v in present):
        cats = list(dict.fromkeys(present))
        codes = np.array([-1 if v is None else cats.index(v) for v in values], dtype=np.int32)
        return pd.Categorical.from_codes(np.repeat(codes, lengths),  # type: ignore[arg-type]
                                         categories=pd.Index(cats))
    text = [None if v is None else str(v) for v in values]
    return _param_column(text, lengths)


def assemble(parts: Sequence[tuple[pa.Table, Mapping[str, object]]]) -> pd.DataFrame:
    """One DataFrame from ``(measure table, params)`` per run: parameter columns first (run
    constants, rebuilt without reading them row by row), then the measures."""
    tables = [t for t, _ in parts]
    measures = to_frame(pa.concat_tables(tables, promote_options="permissive"))
    lengths = np.array([t.num_rows for t in tables], dtype=np.int64)
    names: list[str] = []
    for _, p in parts:
        names.extend(k for k in p if k not in names)
    cols: dict[str, ParamColumn | pd.Series[float]] = {
        k: _param_column([p.get(k) for _, p in parts], lengths) for k in names}
    cols.update({c: measures[c] for c in measures.columns})
    return pd.DataFrame(cols, copy=False)
