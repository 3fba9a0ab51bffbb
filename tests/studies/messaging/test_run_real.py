"""The messaging study end to end through `juice plan / run / report / analyze`, on a real
RabbitMQ node and real oslo.messaging agents (the messaging venv): a shared target (calls), a
fanout, and tc5 (the broker killed and restarted mid-run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from juice.paths import cache_dir
from tests.conftest import Juice
from tests.services.conftest import needs_lab

PY = cache_dir() / "messaging" / "bin" / "python"
no_venv = pytest.mark.skipif(not PY.exists(), reason=f"{PY} missing: run scripts/setup.sh")

SPEC = """
workload: messaging
name: msg-test
sites: 2
delay_ms: 2
buses: [{kind: rabbitmq, nodes: 1, name: central}]
cases:
  - {tc: tc1, clients: 3, servers: 2, rate: 40, duration_s: 3}
  - {tc: tc3, clients: 1, servers: 3, rate: 5, duration_s: 3}
  - {tc: tc5, clients: 2, servers: 2, rate: 20, duration_s: 14, timeout_s: 20,
     faults: [{at_s: 2, kill: rabbitmq, site: 1, restart_after_s: 1}]}
agents_per_process: 2
warmup_s: 0.5
"""


def _runs(results: Path) -> dict[str, Path]:
    out = {}
    for m in results.glob("*/manifest.json"):
        out[json.loads(m.read_text())["params"]["tc"]] = m.parent
    return out


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
@no_venv
def test_messaging_study_real(juice: Juice, tmp_path: Path) -> None:
    spec = tmp_path / "msg.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    code, out, err = juice("plan", str(spec), "--results", str(results))
    assert code == 0, err
    code, out, err = juice("run", str(spec), "--results", str(results))
    assert code == 0, out + err
    runs = _runs(results)
    assert set(runs) == {"tc1", "tc3", "tc5"}, out

    s1 = json.loads((runs["tc1"] / "summary.json").read_text())
    # every call sent was answered once, by one of the two servers (2 processes of 2 agents max)
    assert s1["sent"] > 0 and s1["ok"] == s1["sent"] and s1["lost"] == 0 and s1["duplicates"] == 0
    assert s1["delivered"] == s1["expected_deliveries"] == s1["sent"]
    assert s1["rtt_p50_ms"] is not None and s1["deliveries_per_server"]["servers"] == 2
    procs = json.loads((runs["tc1"] / "processes.json").read_text())
    assert sum(p["agents"] for p in procs) == 5 and all(p["agents"] <= 2 for p in procs)
    assert all(p["rss_kib"] > 0 and p["cpu_s"] is not None for p in procs)

    # the lab's WAN check in every run's manifest (made once for the lab, reused); one clock
    for d in runs.values():
        wan = json.loads((d / "manifest.json").read_text())["wan"]
        assert wan["check"]["pairs"] and wan["check"]["ok"] and wan["check_made"], wan
    assert s1["clocks"]["one_clock"] is True

    s3 = json.loads((runs["tc3"] / "summary.json").read_text())
    assert s3["oneway_bound_ms"] == 0 and "oneway_withheld" not in s3
    assert s3["expected_deliveries"] == 3 * s3["sent"] and s3["delivered"] == s3["expected_deliveries"]
    assert s3["spread_p50_ms"] is not None

    # tc5: the kill and the restart are recorded; every message sent is accounted for by id
    events = [json.loads(x) for x in (runs["tc5"] / "events.jsonl").read_text().splitlines()]
    assert events[0]["action"] == "kill" and events[0]["t_start"] and events[0]["t_end"]
    assert "restart" in events[0]["detail"]
    s5 = json.loads((runs["tc5"] / "summary.json").read_text())
    assert s5["sent"] == s5["ok"] + s5["errors"]
    assert s5["expected_deliveries"] == s5["delivered"] + s5["lost"]
    counters = json.loads((runs["tc5"] / "counters.json").read_text())
    assert {"before", "after"} <= set(counters)

    html = (results / "report.html").read_text()
    assert "Resilience (tc5)" in html and "Agents: processes, memory and CPU" in html
    code, out, err = juice("analyze", str(results), "--json")
    assert code == 0, err
    rows = json.loads(out)
    rows = rows["rows"] if isinstance(rows, dict) and "rows" in rows else rows
    assert len(rows) == 3
    # resumable: nothing left to run
    code, out, err = juice("run", str(spec), "--results", str(results), "--no-report")
    assert code == 0 and "0 before" not in out
