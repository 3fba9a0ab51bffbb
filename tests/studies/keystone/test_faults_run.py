"""A fault schedule through `juice run`, on real servers: a 2-site Keystone on a central
MariaDB (site 1); site 2 is cut off for a few seconds and the Keystone of site 1 is killed and
restarted. The run completes with its failed iterations kept, the events are stored with their
times, the report shows them, nothing is left behind; and Ctrl-C during a partition leaves
the lab healed and removed."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.services.conftest import needs_lab

pytestmark = needs_lab
JUICE = [sys.executable, "-m", "juice.cli"]


def spec(tmp: Path, name: str, faults: list[dict[str, object]], times: int = 80,
         closed: bool = False, timeout_s: float = 5, rate: float = 8) -> Path:
    runner = ({"times": times, "concurrency": 2, "timeout_s": timeout_s} if closed
              else {"rate": rate, "times": times, "timeout_s": timeout_s, "warmup": 2})
    runner["warmup_runs"] = 0  # one run per spec, the one with the faults
    data = {"name": name, "rdbms": ["mariadb"], "sites": [2], "wan": {"delay_ms": [0]}, "load": ["high"],
            "scenarios": ["authenticate_user_and_validate_token"], "check_wan": False, "runner": runner,
            "keystone": {"password_hash_rounds": 4, "prewarm": False}, "faults": faults}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def lab_namespaces(output: str) -> set[str]:
    """The namespaces still present of the labs this run's output names ("lab run1a2b3c: ...");
    other labs (other tests running at the same time) are not this test's business."""
    names = set(re.findall(r"lab (run[0-9a-f]{6}):", output))
    assert names, output[-2000:]
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {ns for line in out.splitlines() for ns in line.split()[:1]
            if any(ns.startswith(f"juice-{n}-") for n in names)}


def test_partition_and_kill_restart_during_a_run(tmp_path: Path) -> None:
    # a timeout well above an iteration's time on a loaded host (the suite's other workers
    # share the cores): site 1's iterations must not fail for want of CPU
    # the cut at 4 s (both drivers running by then on a loaded host) for 4 s (a loaded host
    # stretches an iteration past a second), the kill at 11 s, after the heal and while site 1's
    # open loop (2/s for 30 s: at 8/s a CI host loaded by the other workers left site 1's single
    # Keystone worker behind its arrivals, queueing the cut's requests until the kill) still
    # sends (an iteration count would come late when a loaded host slows site 2: the Ctrl-C test
    # below uses one). 30 s at 2/s per driver: the run outlasts the restart by ~18 s (a CI host
    # loaded by the other workers once took so long to restart Keystone that, with the kill at
    # 14 s of 25, no iteration of site 1 was left after it)
    path = spec(tmp_path, "flt", [{"at_s": 4, "partition": 2, "duration_s": 4},
                                  {"at_s": 11, "kill": "keystone", "site": 1, "restart_after_s": 1}],
                times=60, timeout_s=20, rate=2)
    cp = subprocess.run([*JUICE, "run", str(path), "--results", str(tmp_path / "out")], capture_output=True,
                        text=True, timeout=900)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    (run,) = [d for d in (tmp_path / "out").iterdir() if d.is_dir()]
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert [e["action"] for e in events] == ["partition", "kill"]
    for e in events:
        assert e["error"] is None and e["undo_error"] is None, e
        assert e["t_end"] > e["t_start"]
    assert events[1]["detail"]["pid"] and events[1]["detail"]["restart"]["pid"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["faults"] == events and manifest["params"]["faults"] == 2
    assert manifest["warmup_iterations"] == 4  # 2 per driver, kept out of the 2 x 60
    recs = [json.loads(x) for x in (run / "iterations.jsonl").read_text().splitlines()]
    measured = [r for r in recs if not r.get("warmup")]
    assert len(measured) == 120 and sum(1 for r in recs if r.get("warmup")) == 4
    # site 2 reaches its database in site 1 across the cut: what it starts while cut off
    # fails or waits for the heal (TCP retransmits), while site 1 goes on
    t0, t1 = events[0]["t_start"], events[0]["t_end"]
    cut = [r for r in measured if r["site"] == 2 and t0 + 0.5 <= r["timestamp"] < t1 - 0.5]
    assert cut and all(r["error"] or r["timestamp"] + r["duration"] >= t1 for r in cut)
    # site 1 goes on, mostly: its requests share the central database with site 2's, whose
    # transactions caught by the cut can hold it back (seen on a loaded host: 5 s iterations,
    # one error), so most, not all, of what site 1 starts during the cut succeeds. An iteration
    # still waiting when site 1's Keystone is killed fails by the kill (its connection is reset:
    # a loaded host can queue site 1's requests for seconds; its time is taken once the kill
    # is done, hence the second): that is the kill's, not the cut's
    k0 = events[1]["t_start"]
    site1 = [r for r in measured if r["site"] == 1 and t0 + 0.5 <= r["timestamp"] < t1 - 0.5
             and (not r["error"] or r["timestamp"] + r["duration"] < k0 - 1)]
    assert site1 and sum(1 for r in site1 if not r["error"]) * 2 >= len(site1), site1[:3]
    # site 1's Keystone was down between the kill and its restart: its iterations then failed
    k1 = events[1]["t_end"]
    assert any(r["error"] for r in measured if r["site"] == 1 and k0 <= r["timestamp"] < k1)
    after = [(round(r["timestamp"] - k1, 2), r["error"]) for r in measured
             if r["site"] == 1 and r["timestamp"] > k1 + 0.5]
    restart = round(k1 - k0, 1)
    assert any(not err for _, err in after), f"restart took {restart} s; after it: {after[:8]}"
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Faults</h2>" in html and "partition site 2" in html and "kill keystone in site 1" in html
    assert lab_namespaces(cp.stdout + cp.stderr) == set()


def test_ctrl_c_during_a_partition_heals_and_removes_the_lab(tmp_path: Path) -> None:
    # the closed loop, and a fault at an iteration count
    path = spec(tmp_path, "cc", [{"at_iteration": 10, "partition": 2, "duration_s": 600}], times=4000,
                closed=True)
    out = tmp_path / "out"
    proc = subprocess.Popen([*JUICE, "run", str(path), "--results", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen = ""
    deadline = time.monotonic() + 600
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if "fault 0: at iteration 10: partition site 2" in line:
            time.sleep(2)
            proc.send_signal(signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=300)
    assert "fault 0" in seen, seen[-3000:]
    assert proc.returncode == 130, (seen + rest)[-3000:]
    assert lab_namespaces(seen + rest) == set()
    assert not [d for d in out.glob("*") if d.is_dir()]  # an interrupted run leaves nothing
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(path) not in ps
