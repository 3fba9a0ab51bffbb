"""A run's server errors by message template (juice.trace.logerrors): oslo.log's lines and
gunicorn's own, counted per log, level and template, with their cause; the report's table sums
runs."""

from __future__ import annotations

from pathlib import Path

from juice.report.errors import error_table_html
from juice.trace.logerrors import error_rows, summed

INSTANCE = "6c1e0b7a-8a3c-4f53-9d5e-5b8c1d2e3f40"
REFUSED = ("Database connection was found disconnected; reconnecting: pymysql.err.OperationalError: "
           "(1040, 'Too many connections')")
KEYSTONE = "\n".join([
    "2026-11-27 04:00:00.101 4400 INFO keystone.common.fernet_utils [None req-1 - - - - - -] Loaded 2 keys",
    "2026-11-27 04:00:01.210 4400 ERROR oslo_db.sqlalchemy.engines "
    f"[None req-6c1e0b7a-8a3c-4f53-9d5e-5b8c1d2e3f40 - - - - - -] {REFUSED}",
    "Traceback (most recent call last):",
    '  File "/x/engines.py", line 73, in _connect_ping_listener',
    "pymysql.err.OperationalError: (1040, 'Too many connections')",
    "2026-11-27 04:00:02.330 4401 ERROR oslo_db.sqlalchemy.engines "
    f"[None req-0a1b2c3d-8a3c-4f53-9d5e-5b8c1d2e3f41 - - - - - -] {REFUSED}",
    "2026-11-27 04:00:03.000 4401 WARNING keystone.server.flask.application [None req-2 - - - - - -] "
    "Authorization failed. The request you have made requires authentication. from 10.210.2.2",
    # a traceback as oslo.log writes it under an instance's prefix: a line each, not errors each
    *(f"2026-11-27 04:00:03.500 4401 ERROR nova.compute.manager [instance: {INSTANCE}] {line}" for line in (
        "Traceback (most recent call last):",
        '  File "/x/manager.py", line 2615, in _build_and_run_instance', "    ^^^^^^^^", "")),
    "[2026-11-27 04:00:04 +0000] [4321] [CRITICAL] WORKER TIMEOUT (pid:4400)",
    "[2026-11-27 04:00:05 +0000] [4321] [INFO] Booting worker with pid: 4402", ""])

PLACEMENT = ("2026-11-27 04:00:06.000 5500 ERROR placement.fault_wrap [None req-3 - - - - - -] Placement API "
             "unexpected error: (pymysql.err.OperationalError) (1213, 'Deadlock found when trying to get "
             "lock; try restarting transaction')\n")


def test_errors_by_log_level_and_template_with_their_cause(tmp_path: Path) -> None:
    (tmp_path / "keystone-s1.log").write_text(KEYSTONE)
    (tmp_path / "placement-s2.log").write_text(PLACEMENT)
    rows = error_rows([tmp_path / "keystone-s1.log", tmp_path / "placement-s2.log", tmp_path / "gone.log"])
    by = {(r["log"], r["level"], r["template"][:40]): r for r in rows}
    refused = [r for r in rows if "Too many connections" in r["example"]]
    assert len(refused) == 1 and refused[0]["count"] == 2  # two lines, one template (ids removed)
    assert refused[0]["component"] == "keystone"  # the log's name (oslo_db's logger names none)
    assert refused[0]["log"] == "keystone-s1" and refused[0]["level"] == "ERROR"
    assert "req-" not in refused[0]["template"] and "1040" not in refused[0]["template"]
    assert refused[0]["cause"] == "database refused connections (max_connections)"
    timeout = [r for r in rows if r["template"].startswith("gunicorn: ")]
    assert len(timeout) == 1 and timeout[0]["level"] == "CRITICAL" and timeout[0]["count"] == 1
    assert timeout[0]["component"] == "keystone" and "WORKER TIMEOUT" in timeout[0]["example"]
    assert [r["level"] for r in rows] == sorted((r["level"] for r in rows),
                                                key=("CRITICAL", "ERROR", "WARNING").index)
    assert any(r["level"] == "WARNING" and "Authorization failed" in r["example"] for r in rows)
    assert not any("Traceback" in r["example"] or "File " in r["example"] or not r["example"].strip()
                   or "^^^" in r["example"] for r in rows)
    assert not any("Booting worker" in r["example"] or "Loaded" in r["example"] for r in rows)
    dead = next(r for r in rows if r["log"] == "placement-s2")
    assert dead["component"] == "placement" and dead["cause"] is not None, dead
    assert len(by) == len(rows)
    assert len(error_rows([tmp_path / "keystone-s1.log"], limit=2)) == 2


def test_runs_summed_by_template_for_the_report(tmp_path: Path) -> None:
    (tmp_path / "keystone-s1.log").write_text(KEYSTONE)
    rows = error_rows([tmp_path / "keystone-s1.log"])
    total = summed([("run-a", rows), ("run-b", rows)])
    assert len(total) == len(rows)
    assert all(t["runs"] == 2 for t in total)
    assert sum(t["count"] for t in total) == 2 * sum(r["count"] for r in rows)
    html = "".join(error_table_html([("run-a", rows)], "Keystone servers"))
    assert "Keystone servers" in html and "WORKER TIMEOUT" in html
    assert error_table_html([("run-a", [])], "Keystone servers") == []
