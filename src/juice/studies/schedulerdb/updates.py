"""Background node-state updates: each node reports once a minute, so N nodes make N/60
updates per second, spread evenly. ``OpenLoopUpdater`` issues update number i at its
intended time ``t0 + i/rate`` (open loop: a slow store does not slow the schedule down;
late updates start at once and their lag from the intended time is recorded), using
``workers`` connections in threads, and reports how many completed in the window.

Update semantics per layout:
- historical (2013): one transaction: delete the node's stats rows, insert its ``k`` new
  ones, update the node row (usage columns, ``updated_at``) — ``compute_node_update`` with
  the stats replaced;
- modern: one UPDATE of the node row, stats as a JSON column (``ComputeNode.save``);
- kv: one ``set`` of the node's entry (its whole state).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from juice.studies.schedulerdb import modern
from juice.studies.schedulerdb import schema_2013 as s13
from juice.studies.schedulerdb.populate import kv_encode, kv_key

USAGE_COLS = ("vcpus_used", "memory_mb_used", "local_gb_used", "free_ram_mb", "free_disk_gb",
              "current_workload", "running_vms", "disk_available_least")


def update_node(conn: Any, driver: str, family: str, seed: int, i: int, k: int, version: int) -> None:
    """Apply one state report of node ``i`` (see the module doc)."""
    u = s13.usage(seed, i, version)
    sets = ", ".join(f"{c} = %s" for c in USAGE_COLS)
    vals = [u[c] for c in USAGE_COLS]
    if family == "kv":
        conn.set(kv_key(i), kv_encode(s13.kv_value(seed, i, k, version)))
        return
    cur = conn.cursor()
    try:
        if family == "modern":
            cur.execute(f"UPDATE compute_nodes SET {sets}, stats = %s, updated_at = %s WHERE id = %s",
                        [*vals, modern.stats_json(seed, i, k, version), s13.NOW, i])
            return
        cur.execute("BEGIN")
        try:
            cur.execute("DELETE FROM compute_node_stats WHERE compute_node_id = %s", [i])
            rows = s13.stat_rows(seed, i, k, version)
            if rows:
                key = "`key`" if driver == "mysql" else "key"
                marks = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(rows))
                cur.execute(f"INSERT INTO compute_node_stats (created_at, updated_at, deleted_at, deleted, "
                            f"{key}, value, compute_node_id) VALUES {marks}", [x for r in rows for x in r])
            cur.execute(f"UPDATE compute_nodes SET {sets}, updated_at = %s WHERE id = %s",
                        [*vals, s13.NOW, i])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
    finally:
        cur.close()


class OpenLoopUpdater:
    """Updates at ``rate``/s over node ids ``1..nodes`` (slot ``part`` of ``parts`` updater
    processes: this one issues updates i ≡ part mod parts, at rate/parts each)."""

    def __init__(self, connect: Callable[[], Any], driver: str, family: str, *, nodes: int, rate: float,
                 seed: int, k: int, workers: int, part: int = 0, parts: int = 1) -> None:
        self.connect, self.driver, self.family = connect, driver, family
        self.nodes, self.rate, self.seed, self.k = nodes, rate, seed, k
        self.part, self.parts = part, parts
        self.conns = [connect() for _ in range(workers)]
        self.stop_evt = threading.Event()
        self.lock = threading.Lock()
        self.next_i = 0
        self.done = 0
        self.errors: dict[str, int] = {}
        self.lags: list[float] = []
        self.threads: list[threading.Thread] = []
        self.t0 = 0.0
        self.t_end = 0.0

    def _take(self) -> int:
        with self.lock:
            i = self.next_i
            self.next_i += 1
            return i

    def _loop(self, conn: Any) -> None:
        my_rate = self.rate / self.parts
        while not self.stop_evt.is_set():
            j = self._take()
            intended = self.t0 + j / my_rate
            delay = intended - time.monotonic()
            if delay > 0 and self.stop_evt.wait(delay):
                return
            i = (j * self.parts + self.part) % self.nodes + 1
            lag = time.monotonic() - intended
            try:
                update_node(conn, self.driver, self.family, self.seed, i, self.k, j // self.nodes + 1)
                ok, err = True, ""
            except Exception as e:  # recorded, the load goes on
                ok, err = False, type(e).__name__
            with self.lock:
                if time.monotonic() <= self.t_end or not self.stop_evt.is_set():
                    if ok:
                        self.done += 1
                        self.lags.append(lag)
                    else:
                        self.errors[err] = self.errors.get(err, 0) + 1

    def start(self) -> None:
        if self.rate <= 0:
            return
        self.t0 = time.monotonic()
        self.threads = [threading.Thread(target=self._loop, args=(c,), daemon=True) for c in self.conns]
        for t in self.threads:
            t.start()

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        """Stop (bounded wait) and report: count, elapsed, achieved vs target rate, lags."""
        with self.lock:
            self.t_end = time.monotonic()
            self.stop_evt.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        elapsed = self.t_end - self.t0 if self.threads else 0.0
        lags = sorted(self.lags)

        def pct(q: float) -> float | None:
            return round(lags[int(q * (len(lags) - 1))] * 1000, 2) if lags else None
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass
        return {"count": self.done, "elapsed_s": round(elapsed, 3),
                "target_rate": self.rate / self.parts,
                "achieved_rate": round(self.done / elapsed, 2) if elapsed > 0 else 0.0,
                "errors": self.errors, "lag_p50_ms": pct(0.5), "lag_p99_ms": pct(0.99),
                "lag_max_ms": pct(1.0), "workers": len(self.conns)}
