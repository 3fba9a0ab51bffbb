"""haproxy's own log read back (``juice.trace.lblog``): lines as haproxy 2.6 writes them with
``option httplog`` (raw, as Juice's haproxy logs to stdout, or behind a syslog prefix, as a real
cloud's does), grouped, the abnormal ones explained. The real server's lines are checked in
tests/services/test_haproxy.py."""

from __future__ import annotations

from pathlib import Path

from juice.trace import lblog

OK = ('10.210.1.1:41234 [27/Nov/2026:06:01:02.123] nova-api nova-api/nova-api-s1 0/0/1/412/413 202 1234 - - '
      '---- 12/12/11/11/0 0/0 "POST /v2.1/servers HTTP/1.1"')
TIMEOUT = ('10.210.1.1:41240 [27/Nov/2026:06:01:03.001] nova-api nova-api/nova-api-s1 0/0/0/-1/50001 504 194 '
           '- - sH-- 334/120/118/118/0 0/0 "GET /v2.1/servers/6f1c2a8e-1b2c-4d5e-8f90-123456789abc HTTP/1.1"')
REFUSED = ('Nov 27 06:01:04 ctl1 haproxy[4242]: 10.0.0.9:5555 [27/Nov/2026:06:01:04.500] placement '
           'placement/placement-s2 0/0/-1/-1/0 503 217 - - SC-- 3/3/0/0/3 0/0 '
           '"GET /resource_providers HTTP/1.1"')


def test_lines_parse_with_or_without_a_syslog_prefix() -> None:
    ok, to, ref = map(lblog.parse_line, (OK, TIMEOUT, REFUSED))
    assert ok is not None and (ok.frontend, ok.server, ok.status, ok.term, ok.tr_ms, ok.ta_ms) == \
        ("nova-api", "nova-api-s1", 202, "--", 412, 413)
    assert to is not None
    assert (to.status, to.term, to.tr_ms, to.ta_ms, to.method) == (504, "sH", -1, 50001, "GET")
    assert ref is not None and (ref.frontend, ref.status, ref.term) == ("placement", 503, "SC")
    assert lblog.parse_line("2026-11-27 06:01:02.123 1234 ERROR nova.api Traceback") is None
    assert lblog.parse_line("[NOTICE] (1) : haproxy version is 2.6.12") is None


def test_meanings_in_haproxys_words() -> None:
    said = "the server-side timeout struck while waiting for the server's response headers"
    assert lblog.meaning("sH--") == said
    assert lblog.meaning("SC") == "the server aborted or refused while connecting to the server"
    assert lblog.meaning("----") == "normal end"


def test_summary_groups_ids_and_keeps_the_abnormal_with_what_governs_them(tmp_path: Path) -> None:
    log = tmp_path / "haproxy-s1.log"
    log.write_text("\n".join([OK, OK, TIMEOUT, TIMEOUT.replace("6f1c2a8e-1b2c-4d5e-8f90-123456789abc",
                                                                "0a1b2c3d-1b2c-4d5e-8f90-123456789abc"),
                              REFUSED, "[WARNING] something haproxy said at start"]) + "\n")
    rows = lblog.summary([log, tmp_path / "missing.log"])
    assert [(r["status"], r["term"], r["request"], r["count"]) for r in rows] == [
        (202, "--", "POST /v2.1/servers", 2), (504, "sH", "GET /v2.1/servers/<id>", 2),
        (503, "SC", "GET /resource_providers", 1)]
    table = lblog.table_rows(rows)
    assert [(r["status"], r["termination"]) for r in table] == [(504, "sH"), (503, "SC")]
    assert table[0]["longest (s)"] == 50.001 and "timeout server" in table[0]["what governs it"]
    verdict = lblog.lb_verdict("upstream refused or timed out (load balancer or API)", rows)
    assert verdict is not None
    assert verdict.startswith("haproxy log: 2 x 504 sH (the server-side timeout struck")
    assert "1 x 503 SC" in verdict
    # other causes get nothing from the load balancer's log; a clean log says so
    assert lblog.lb_verdict("RPC timeout", rows) is None
    clean = lblog.summary([tmp_path / "missing.log"])
    assert lblog.lb_verdict("upstream refused or timed out (load balancer or API)", clean) is None
    ok_only = [r for r in rows if r["status"] == 202]
    assert lblog.lb_verdict("upstream refused or timed out (load balancer or API)", ok_only) == \
        "haproxy log: no 5xx of its own logged"


def test_run_logs_finds_the_slices(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    for name in ("haproxy-s1.log", "haproxy.log", "nova-api-s1.log"):
        (tmp_path / "logs" / name).write_text("")
    assert [p.name for p in lblog.run_logs(tmp_path)] == ["haproxy-s1.log", "haproxy.log"]
    assert lblog.run_logs(tmp_path / "nothing") == []
