"""Failures named by cause from the services' messages (seed 004 Table 1), and the database's
event counters over a run (issue 28). The messages are nova's, oslo's and the database's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from juice.errors import ServiceError
from juice.report.traces import trace_sections
from juice.services.databases import dbevents
from juice.trace import causes
from juice.trace.tables import trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trace"


@pytest.mark.parametrize("message,cause", [
    ("QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00",
     "database connection pool exhausted"),
    ("(pymysql.err.OperationalError) (1040, 'Too many connections')",
     "database refused connections (max_connections)"),
    ("(pymysql.err.OperationalError) (1213, 'Deadlock found when trying to get lock; "
     "try restarting transaction')", "database deadlock or Galera certification conflict"),
    ("Timed out waiting for a reply to message ID 5c2d", "RPC timeout"),
    ("AMQP server on 10.210.1.2:5672 is unreachable: timed out. Trying again in 1 seconds.",
     "message bus unreachable"),
    ("No valid host was found. There are not enough hosts available.",
     "no capacity for the request (scheduler)"),
    ("Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures",
     "retries exhausted"),
    ("juice-fake: injected spawn failure on node juice-c1-n0000 (SIMULATED, p=0.5)",
     "spawn failed on the node"),
    ("Error contacting glance server 'http://10.210.1.2:9292' for 'get', retrying.", "image service error"),
    ("HTTP 504", "upstream refused or timed out (load balancer or API)"),
    # what Juice's driver saw in front of a haproxy at maxconn 8 (error templates, numbers masked)
    ("[Errno <n>] Connection reset by peer",
     "connection refused or reset (load balancer or API not accepting)"),
    ("Cannot connect to host <n>.<n>.<n>.<n>:<n> ssl:default [Connect call failed ('<n>.<n>.<n>.<n>', <n>)]",
     "connection refused or reset (load balancer or API not accepting)"),
    ("Unable to establish connection to http://10.210.1.2:5000/v3/auth/tokens: Connection refused",
     "identity service unreachable or refusing"),
])
def test_messages_name_their_cause(message: str, cause: str) -> None:
    found = causes.cause_of(message)
    assert found is not None and found[0] == cause and found[1]


def test_an_unknown_message_names_no_cause_and_a_fault_wins_over_later_errors() -> None:
    assert causes.cause_of("Instance is in an unexpected state") is None and causes.cause_of(None) is None
    assert causes.boot_cause(None, None, ["something odd", "Timed out waiting for a reply"]) == "RPC timeout"
    assert causes.boot_cause("No valid host was found.", None, ["Timed out waiting for a reply"]) \
        == "no capacity for the request (scheduler)"
    # the retries were used up by spawn failures: that is the cause
    assert causes.boot_cause("Exceeded maximum number of retries.", None,
                             ["juice-fake: injected build failure on node n0"]) == "spawn failed on the node"
    assert causes.boot_cause("Exceeded maximum number of retries.", None, []) == "retries exhausted"
    # no valid host because the scheduler's ComputeFilter found the nodes' services down
    late = ("(juice-c6, juice-c6-n0047) ram: 16384MB disk: 0MB io_ops: 0 instances: 0, "
            "allocation_candidates: 1 has not been heard from in a while")
    assert causes.boot_cause("No valid host was found.", None, [late]) == \
        "compute services seen as down (their heartbeats late)"
    assert "service_down_time" in (causes.cause_of(late) or ("", ""))[1]


def test_the_database_counters_say_which_conflict_it_was() -> None:
    dead = "database deadlock or Galera certification conflict"
    assert causes.db_verdict(dead, {"Innodb_deadlocks": 0, "wsrep_local_cert_failures": 3,
                                    "wsrep_local_bf_aborts": 1}) == \
        "database counters: 3 certification failure(s), 1 brute-force abort(s)"
    assert "no deadlock or conflict counted" in str(causes.db_verdict(dead, {"Innodb_deadlocks": 0}))
    refused = causes.db_verdict("database refused connections (max_connections)",
                                {"Connection_errors_max_connections": 7, "Max_used_connections": 152,
                                 "max_connections": 151})
    assert refused == "database counters: 7 refused, peak 152 of max_connections 151"
    assert causes.db_verdict("RPC timeout", {"Innodb_deadlocks": 2}) is None
    assert causes.db_verdict(dead, None) is None


class _Server:
    """What dbevents asks a MariaDB server (its ``query``), answered from a dict."""

    def __init__(self, status: dict[str, int], limit: int = 151, down: bool = False) -> None:
        self.status, self.limit, self.down = status, limit, down

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.down:
            raise ServiceError("node down")
        if "VARIABLES" in sql:
            return [("max_connections", str(self.limit))]
        return [(k, str(v)) for k, v in self.status.items() if f"'{k}'" in sql]


def test_event_counters_are_summed_over_nodes_with_the_peak_kept_and_a_down_node_skipped() -> None:
    a = _Server({"Innodb_deadlocks": 1, "wsrep_local_cert_failures": 2, "Max_used_connections": 40})
    b = _Server({"Innodb_deadlocks": 0, "wsrep_local_cert_failures": 5, "Max_used_connections": 70})
    probe = dbevents.MySQLEvents([a, b])
    with probe.window() as w:
        a.status.update(Innodb_deadlocks=4, Max_used_connections=90)
        b.status.update(wsrep_local_cert_failures=6)
    assert w.result == {"Innodb_deadlocks": 3, "wsrep_local_cert_failures": 1, "Max_used_connections": 90,
                        "max_connections": 151}
    b.down = True
    assert dbevents.MySQLEvents([a, b]).snapshot()["Innodb_deadlocks"] == 4
    assert dbevents.delta({"Innodb_deadlocks": 9}, {"Innodb_deadlocks": 2}) == {"Innodb_deadlocks": 0}


def test_a_traced_run_names_its_failures_causes_in_the_tables_and_the_report(tmp_path: Path) -> None:
    t = trace([FIX / "novalidhost"], workers=1)
    failed = t.boots[t.boots["state"] == "no_valid_host"]
    assert len(failed) == 2 and (failed["cause"] == "no capacity for the request (scheduler)").all()
    assert t.boots[t.boots["state"] == "active"]["cause"].isna().all()
    assert set(t.faults["cause"]) == {"no capacity for the request (scheduler)"}
    html = "".join(trace_sections([FIX / "novalidhost"], t))
    assert "Failed boots by cause" in html and "capacity, filters, placement allocation candidates" in html
    assert "Database event counters" not in html  # the fixture's run predates the counters


def test_haproxys_own_log_joins_the_report_when_a_run_kept_it(tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "novalidhost"
    shutil.copytree(FIX / "novalidhost", run)
    (run / "logs" / "haproxy-s1.log").write_text(
        '10.210.1.1:41240 [27/Nov/2026:06:01:03.001] nova-api nova-api/nova-api-s1 0/0/0/-1/50001 504 194 '
        '- - sH-- 334/120/118/118/0 0/0 "POST /v2.1/servers HTTP/1.1"\n'
        '10.210.1.1:41241 [27/Nov/2026:06:01:03.101] nova-api nova-api/nova-api-s1 0/0/0/12/13 200 94 '
        '- - ---- 334/120/118/118/0 0/0 "GET /v2.1/flavors HTTP/1.1"\n')
    html = "".join(trace_sections([run]))
    assert "haproxy&#x27;s own log: the answers that went wrong" in html or \
        "haproxy's own log: the answers that went wrong" in html
    assert "POST /v2.1/servers" in html and "sH" in html and "GET /v2.1/flavors" not in html
    assert "load balancer&#x27;s log" in html or "load balancer's log" in html
