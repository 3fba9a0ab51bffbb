"""The ``profile.parquet`` format and its writer (used by ``juice.profile.sampler``).

One row per (tick, process | site link | database server, metric)::

    time     float64   epoch seconds (the iterations' clock)
    site     int16     0 = the core namespace
    component dictionary<int16, string>   galera, keystone, load-driver, link, ...
    pid      int32     0 for a site's link
    metric   dictionary<int8, string>     one of METRICS
    value    float64   CUMULATIVE for the metrics in CUMULATIVE, else the gauge's value

Rows are kept in compact arrays (~26 bytes each) and spilled as a row group every
``FLUSH_ROWS`` rows into a temporary file next to the table, which is renamed into place
when complete (or removed when the run was interrupted).
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PROFILE_TABLE = "profile.parquet"
PROFILE_VERSION = "1"
FLUSH_ROWS = 200_000
PROCESS_METRICS = ("cpu_user_s", "cpu_system_s", "rss_bytes", "threads", "fds")
LINK_METRICS = ("net_in_bytes", "net_out_bytes", "net_in_packets", "net_out_packets")
DB_METRICS = ("db_reads", "db_writes", "fc_paused_s", "fc_paused", "cluster_size")
METRICS = (*PROCESS_METRICS, *LINK_METRICS, *DB_METRICS)
METRIC_INDEX = {m: i for i, m in enumerate(METRICS)}
CUMULATIVE = ("cpu_user_s", "cpu_system_s", *LINK_METRICS, "db_reads", "db_writes", "fc_paused_s")


def schema() -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    return pa.schema([("time", pa.float64()), ("site", pa.int16()),
                      ("component", pa.dictionary(pa.int16(), pa.string())), ("pid", pa.int32()),
                      ("metric", pa.dictionary(pa.int8(), pa.string())), ("value", pa.float64())],
                     metadata={"juice_profile_version": PROFILE_VERSION})


class Rows:
    """Columnar rows; ``add`` takes the component's and the metric's indexes."""

    def __init__(self) -> None:
        self.time: array[float] = array("d")
        self.site: array[int] = array("h")
        self.comp: array[int] = array("h")
        self.pid: array[int] = array("i")
        self.metric: array[int] = array("b")
        self.value: array[float] = array("d")

    def add(self, t: float, site: int, comp: int, pid: int, metric: int, value: float) -> None:
        self.time.append(t)
        self.site.append(site)
        self.comp.append(comp)
        self.pid.append(pid)
        self.metric.append(metric)
        self.value.append(value)

    def __len__(self) -> int:
        return len(self.time)

    def table(self, components: Sequence[str]) -> Any:
        import numpy as np
        import pyarrow as pa

        def dict_col(codes: Any, idx_type: Any, names: Sequence[str]) -> Any:
            return pa.DictionaryArray.from_arrays(
                pa.array(np.frombuffer(codes, dtype=codes.typecode), type=idx_type),
                pa.array(list(names), pa.string()))

        cols = {"time": pa.array(np.frombuffer(self.time, dtype=np.float64)),
                "site": pa.array(np.frombuffer(self.site, dtype=np.int16)),
                "component": dict_col(self.comp, pa.int16(), components),
                "pid": pa.array(np.frombuffer(self.pid, dtype=np.int32)),
                "metric": dict_col(self.metric, pa.int8(), METRICS),
                "value": pa.array(np.frombuffer(self.value, dtype=np.float64))}
        return pa.table(cols, schema=schema())


class Writer:
    """``out_dir/profile.parquet`` written in row groups: ``flush`` (when ``rows`` is big
    enough), then ``finish`` (complete, renamed into place) or ``discard``."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / PROFILE_TABLE
        self.tmp = out_dir / f".{PROFILE_TABLE}.{os.getpid()}.tmp"
        self.rows = Rows()
        self.written = 0
        self._pq: Any = None

    def flush(self, components: Sequence[str]) -> None:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        table = self.rows.table(components)
        if self._pq is None:
            self._pq = pq.ParquetWriter(str(self.tmp), schema(), compression="zstd")
        self._pq.write_table(table)
        self.written += table.num_rows
        self.rows = Rows()

    def finish(self, components: Sequence[str]) -> Path:
        """Write what is left, close, fsync and rename into place; the table's path."""
        try:
            self.flush(components)
            self._pq.close()
            self._pq = None
            with open(self.tmp, "rb") as f:
                os.fsync(f.fileno())
            os.chmod(self.tmp, 0o644)
            os.replace(self.tmp, self.path)
            return self.path
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop everything not renamed into place (an interrupted run, a failed write)."""
        self.rows = Rows()
        if self._pq is not None:
            try:
                self._pq.close()
            except Exception:  # already failing: the temp file goes below
                pass
            self._pq = None
        self.tmp.unlink(missing_ok=True)


def add_to_manifest(manifest: Path, summary: Mapping[str, Any]) -> None:
    """Add ``"profile": summary`` to a run's manifest.json, atomically. The manifest's mtime
    is kept: the tidy cache (actions.parquet) compares mtimes, and this entry changes no
    parameter of the run."""
    from juice.util import atomic

    st = manifest.stat()
    data = json.loads(manifest.read_text())
    data["profile"] = dict(summary)
    atomic.write_json(manifest, data)
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
