"""Write attribution on real servers: a 1-site Keystone on MariaDB (and on PostgreSQL) with
``keystone.write_attribution`` runs create_user_update_password twice (two repetitions,
interleaved); each run's statements are attributed by kind and table from
performance_schema (pg_stat_statements), to tables of the keystone schema, and its writes by
table add up to the %reads/%writes write count (Com_* / pg_stat_statements). On MariaDB the
manifest records performance_schema ON as a deviation; it records where each run stood in the
order and the servers' own counters around it (memcached, buffer pool, table rows); the report
shows the breakdown, the order-effect table and the counters early vs late."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.services.conftest import needs_lab

pytestmark = needs_lab
JUICE = [sys.executable, "-m", "juice.cli"]


@pytest.mark.parametrize("rdbms", ["mariadb", "postgres"])
def test_writes_are_attributed_to_keystone_tables_and_add_up(tmp_path: Path, rdbms: str) -> None:
    data = {"name": "attr", "rdbms": [rdbms], "sites": [1], "wan": {"delay_ms": [0]},
            "scenarios": ["create_user_update_password"], "repetitions": 2, "check_wan": False,
            "runner": {"times": 3, "concurrency": 1, "warmup_runs": 0},
            "keystone": {"password_hash_rounds": 4, "write_attribution": True}}
    spec = tmp_path / "attr.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    cp = subprocess.run([*JUICE, "run", str(spec), "--results", str(out)], capture_output=True,
                        text=True, timeout=900)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    runs = sorted(d for d in out.iterdir() if d.is_dir() and (d / "manifest.json").is_file())
    assert len(runs) == 2
    positions = []
    for run in runs:
        m = json.loads((run / "manifest.json").read_text())
        wa, rw = m["write_attribution"], m["rwratio"]
        source = "performance_schema" if rdbms == "mariadb" else "pg_stat_statements"
        assert wa["source"].startswith(source) and wa["exact"]
        assert ("performance_schema" in m["deployment"]["deviations"]) if rdbms == "mariadb" else (
            "deviations" not in m["deployment"])
        tables = set(wa["schema_tables"])
        assert len(tables) > 10, tables  # Keystone's schema, read from the server's catalog
        writes = [r for r in wa["rows"] if r["kind"] in ("insert", "update", "delete", "replace")]
        assert writes and all(r["table"] in tables for r in writes), writes
        assert sum(r["statements"] for r in writes) == wa["writes"] == rw["writes"] > 0
        assert {"insert", "update"} <= {r["kind"] for r in writes}
        assert "user" in {r["table"] for r in writes if r["kind"] == "insert"}  # the created users
        reads = [r for r in wa["rows"] if r["kind"] == "select"]
        assert sum(r["statements"] for r in reads) == wa["reads"] <= rw["reads"]
        assert m["order"]["mode"] == "interleaved" and m["repetition"] == m["params"]["repetition"]
        # the servers' own counters around the run (issue 27): Keystone's memcached, the buffer
        # pool (InnoDB / shared buffers), the rows of the tables that grow (users created: 4)
        sc = m["server_counters"]
        assert "errors" not in sc, sc.get("errors")
        d, start, end = sc["derived"], sc["start"], sc["end"]
        assert d["memcached.cmd_get"] > 0 and 0 <= d["cache_hit_rate"] <= 1
        pool = ("innodb.buffer_pool_read_requests" if rdbms == "mariadb" else "pg.blks_hit")
        assert d[pool] > 0 and 0 <= d["buffer_pool_miss_rate"] <= 1
        assert rdbms != "mariadb" or "innodb.history_list_length" in start
        # connections: none refused at the limit, and the peak is at least Keystone's one
        assert rdbms != "mariadb" or (d["mysql.refused_max_connections"] == 0
                                      and d["mysql.max_used_connections"] >= 1)
        # Keystone's workers' full collections, from their logs (pre-warmed: counted, not in the window)
        assert m["deployment"]["prewarm"]["1"]["done"], m["deployment"]["prewarm"]
        assert start["keystone.full_gcs"] >= 1 and "keystone.full_gc_ms" in d
        assert start["rows.user"] >= 1 and start["rows.project"] >= 1 and "rows.revocation_event" in end
        positions.append((m["order"]["position"], m["order_index"]))
    assert sorted(positions) == [(0, 0), (1, 1)]
    html = (out / "report.html").read_text()
    assert "Writes by table" in html and "Order effect" in html
    assert "What the servers did, early vs late" in html and "cache hit rate (window)" in html
