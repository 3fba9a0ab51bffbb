"""Tidy tables: one row per atomic action per iteration, for every run, in one DataFrame.

A run directory (see ``juice.results.store``) holds ``manifest.json`` (with ``params``) and
``iterations.jsonl`` (one :class:`juice.load.api.IterationRecord` per line; warm-up iterations,
tagged ``"warmup": true``, are left out: they are stored, never counted).
:func:`build_run_table` turns them into ``actions.parquet`` next to them, written atomically:

- one row per atomic action per iteration, children included (``depth`` 1, 2... and the name
  of their ``parent``), so stacked sums use ``depth == 0`` only;
- a failed iteration that recorded no atomic action still gets one row (``operation`` NULL):
  failures are never dropped;
- every run parameter is a column (nested dicts flattened as ``a.b``, lists as JSON text),
  constant over the run's rows; unknown extra parameters become extra columns.

:func:`load` reads run directories, results roots (searched for complete runs: names starting
with ``.`` or ending in ``.partial``/``.failed`` are skipped and counted, and so are discarded
warm-up runs, ``<run>.warmup``: ``juice.results.store.counted``) and external Rally
JSON files (see ``juice.results.rally_import``) into one pandas DataFrame. String columns are
categoricals; cached ``actions.parquet`` files are used when newer than their sources. The
table format itself (columns, building, assembling) is ``juice.results.tidy_table``; its public
names are re-exported here.

    df = tidy.load([Path("results/quickstart")])
    df[df.depth == 0].groupby("operation", observed=True).duration_s.mean()
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from juice.errors import UserError
from juice.results import rally_import
from juice.results.store import WARMUP_SUFFIX, counted

# The table itself (columns, building, assembling) lives in tidy_table; re-exported here.
from juice.results.tidy_table import ITERATION_KEY as ITERATION_KEY
from juice.results.tidy_table import MEASURES, TIDY_VERSION, assemble, iterations_table, split_params
from juice.results.tidy_table import flatten_params as flatten_params
from juice.results.tidy_table import param_columns as param_columns
from juice.results.tidy_table import to_frame as to_frame
from juice.util.jsontypes import JSONObject

TABLE_NAME = "actions.parquet"
ITERATIONS = "iterations.jsonl"
MANIFEST = "manifest.json"
MAX_SEARCH_DEPTH = 4  # results root -> study -> ... -> run directory
T = TypeVar("T")


# ------------------------------------------------------------------------ run directories


def manifest_or_empty(run_dir: Path) -> JSONObject:
    """The run's manifest, or {} when it is missing or unreadable (for the report's optional
    blocks, which leave such a run out; ``read_manifest`` says why)."""
    try:
        return read_manifest(run_dir)
    except UserError:
        return {}


def read_manifest(run_dir: Path) -> JSONObject:
    """The run's manifest (a UserError naming the file if it is missing or not JSON)."""
    path = run_dir / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no manifest.json: not a Juice run directory") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: unreadable manifest ({e}): re-run or remove this run") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: the manifest is not a JSON object")
    return data


def run_params(run_dir: Path, manifest: Mapping[str, object] | None = None) -> dict[str, object]:
    """The manifest's ``params`` (``{}`` when absent)."""
    m = manifest if manifest is not None else read_manifest(run_dir)
    params = m.get("params") or {}
    return dict(params) if isinstance(params, Mapping) else {}


def _read_iterations(path: Path) -> list[JSONObject]:
    records: list[JSONObject] = []
    try:
        with path.open() as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    raise UserError(f"{path}:{lineno}: not a JSON object: the run is corrupt, "
                                    "re-run it or remove its directory") from None
                if isinstance(rec, dict) and not rec.get("warmup"):
                    records.append(rec)  # warm-up iterations stay in the file, out of statistics
    except FileNotFoundError:
        pass  # a run without iterations (e.g. every iteration skipped): an empty table
    return records


def run_name(run_dir: Path) -> str:
    """The run's name: its directory's, also while it is still ``.<name>.partial`` (the
    runner builds the table before the directory is renamed into place)."""
    name = run_dir.name
    if name.startswith(".") and name.endswith(".partial"):
        return name[1:-len(".partial")]
    return name


def _table_of(run_dir: Path) -> pa.Table:
    manifest = read_manifest(run_dir)
    params = run_params(run_dir, manifest)
    return iterations_table(run_name(run_dir), params, _read_iterations(run_dir / ITERATIONS))


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so readers see the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_run_table(run_dir: Path) -> Path:
    """Write ``<run_dir>/actions.parquet`` from the run's manifest and iterations; its path."""
    out = run_dir / TABLE_NAME
    write_parquet_atomic(_table_of(run_dir), out)
    return out


def _cache_fresh(run_dir: Path) -> bool:
    table = run_dir / TABLE_NAME
    try:
        t = table.stat().st_mtime
        for src in (MANIFEST, ITERATIONS):
            p = run_dir / src
            if p.exists() and p.stat().st_mtime > t:
                return False
        meta = pq.read_schema(table).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return False
    return bool(meta.get(b"juice_tidy_version") == TIDY_VERSION.encode())


def _build_cached(run_dir: Path) -> pa.Table:
    table = _table_of(run_dir)
    if not (run_dir / ITERATIONS).exists():
        return table  # not a run of iterations (e.g. scheduler-db): nothing worth caching
    try:
        write_parquet_atomic(table, run_dir / TABLE_NAME)
    except OSError:
        pass  # read-only results (an archive): analyse in memory
    return table


def _measures(run_dir: Path) -> tuple[pa.Table, dict[str, object]]:
    """Measure columns and parameters of one run; the constant parameter columns of a cached
    parquet are not even read (they are in its metadata)."""
    if _cache_fresh(run_dir):
        path = run_dir / TABLE_NAME
        meta = pq.read_schema(path).metadata or {}
        if b"juice_params" in meta:
            return (pq.read_table(path, columns=list(MEASURES)).replace_schema_metadata(None),
                    json.loads(meta[b"juice_params"]))
        return split_params(pq.read_table(path))
    return split_params(_build_cached(run_dir))


# ------------------------------------------------------------------------------ discovery


def is_run_dir(p: Path) -> bool:
    """A complete run that counts (a warm-up run is complete but never counted)."""
    return p.is_dir() and (p / MANIFEST).is_file() and counted(p.name)


def _incomplete(name: str) -> bool:
    return name.startswith(".") or name.endswith(".partial") or name.endswith(".failed")


def _warmup(p: Path) -> bool:
    """A discarded warm-up run of a deployment (complete, kept for inspection, not counted)."""
    return p.name.endswith(WARMUP_SUFFIX) and not p.name.startswith(".") and (p / MANIFEST).is_file()


@dataclass
class Discovery:
    """What :func:`discover` found: complete runs, Rally files, and what it skipped."""

    runs: list[Path] = field(default_factory=list)
    rally_files: list[Path] = field(default_factory=list)
    failed: list[Path] = field(default_factory=list)
    partial: list[Path] = field(default_factory=list)
    warmup: list[Path] = field(default_factory=list)  # warm-up runs under a searched directory

    @property
    def empty(self) -> bool:
        return not self.runs and not self.rally_files


def _walk(d: Path, depth: int, found: Discovery) -> None:
    if depth > MAX_SEARCH_DEPTH:
        return
    try:
        children = sorted(d.iterdir())
    except OSError as e:
        raise UserError(f"{d}: cannot list this directory ({e.strerror})") from None
    for c in children:
        if not c.is_dir():
            continue
        if c.name.endswith(".failed"):
            found.failed.append(c)
        elif c.name.startswith(".") or c.name.endswith(".partial"):
            if c.name.endswith(".partial"):
                found.partial.append(c)
        elif _warmup(c):
            found.warmup.append(c)
        elif is_run_dir(c):
            found.runs.append(c)
        else:
            _walk(c, depth + 1, found)


def discover(paths: Sequence[Path]) -> Discovery:
    """Resolve ``paths`` (run dirs, results roots, Rally JSON files) into complete runs.

    A directory that is neither a run nor holds runs, but holds ``*.json`` files, is read as
    a directory of Rally result files (like the seed's ``rally_home/``). Warm-up runs under a
    searched directory are skipped (``found.warmup``); one given by its own path is read.
    """
    found = Discovery()
    for p in paths:
        if not p.exists():
            raise UserError(f"{p}: no such file or directory: give a results directory, a run "
                            "directory or a Rally JSON file")
        if p.is_file():
            if p.suffix != ".json":
                raise UserError(f"{p}: not a run directory nor a Rally .json file")
            found.rally_files.append(p)
        elif _incomplete(p.name):
            (found.failed if p.name.endswith(".failed") else found.partial).append(p)
        elif is_run_dir(p) or _warmup(p):
            found.runs.append(p)
        else:
            before = len(found.runs) + len(found.failed) + len(found.partial) + len(found.warmup)
            _walk(p, 0, found)
            if len(found.runs) + len(found.failed) + len(found.partial) + len(found.warmup) == before:
                found.rally_files.extend(sorted(q for q in p.glob("*.json") if q.is_file()))
    return found


# ---------------------------------------------------------------------------------- load


def _parallel(fn: Callable[[Path], T], items: list[Path]) -> Iterable[T]:
    """``map(fn, items)`` on a few threads (parquet decoding releases the GIL), in order."""
    if len(items) < 4:
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return list(pool.map(fn, items))


def no_run_error(paths: Sequence[Path], found: Discovery) -> UserError:
    """The one-line error for paths that hold no complete run."""
    where = ", ".join(str(p) for p in paths) or "(no path)"
    extra = f" ({len(found.failed)} failed runs skipped)" if found.failed else ""
    return UserError(f"{where}: no complete run found{extra}: give a results directory "
                     "such as results/quickstart, a run directory or a Rally JSON file")


def load(paths: Sequence[Path], params: Mapping[str, object] | None = None,
         allow_empty: bool = False) -> pd.DataFrame:
    """One tidy DataFrame over run dirs, results roots and Rally JSON files.

    ``params`` fill parameters of imported Rally files (e.g. ``{"rdbms": "galera"}``); Juice
    runs carry theirs in their manifests. ``df.attrs`` holds ``runs``, ``failed_runs`` and
    ``partial_runs`` (counts). Raises UserError when no complete run is found, or when the
    runs hold no iteration (unless ``allow_empty``: then an empty table with the columns).
    """
    found = discover(paths)
    if found.empty:
        raise no_run_error(paths, found)
    parts = list(_parallel(_measures, found.runs))
    for f in found.rally_files:
        parts.extend(split_params(t) for t in rally_import.tables(f, params or {}))
    if not parts or (sum(t.num_rows for t, _ in parts) == 0 and not allow_empty):
        raise UserError(f"{', '.join(str(p) for p in paths)}: the runs hold no iteration")
    df = assemble(parts)
    df.attrs.update(runs=len(found.runs) + len(found.rally_files), failed_runs=len(found.failed),
                    partial_runs=len(found.partial))
    return df
