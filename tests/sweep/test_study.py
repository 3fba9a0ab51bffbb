"""`juice run` end to end on real servers: a Keystone study is stored run by run, an
interrupted sweep resumes without redoing or corrupting anything, and the results feed
`juice analyze` and the report. The deployment's warm-up run (runner.warmup_runs, default 1)
is made on the real servers too, kept as ``<run>.warmup`` and counted nowhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
import yaml

from juice.results.store import counted
from tests.conftest import lab_capable, said_lines

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(lab_capable() is not None, reason=str(lab_capable()))]

JUICE = [sys.executable, "-m", "juice.cli"]
# these runs last ~1 s: profile them at 10 Hz (the default, 1 Hz, would miss the load driver)
ENV = {**os.environ, "JUICE_PROFILE_HZ": "10"}


def spec_file(tmp: Path, name: str, **over: object) -> Path:
    data = {"name": name, "rdbms": ["mariadb"], "sites": [1], "wan": {"delay_ms": [0]},
            "scenarios": ["authenticate_user_and_validate_token"], "repetitions": 3,
            "runner": {"times": 3, "concurrency": 1}, "check_wan": False,
            # no pre-warm: these runs test the study's mechanics, not Keystone's timing
            "keystone": {"password_hash_rounds": 4, "prewarm": False}}
    data.update(over)
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def complete_runs(study: Path) -> dict[str, Path]:
    out = {}
    for m in study.glob("*/manifest.json"):
        if counted(m.parent.name):  # not partial, failed or a warm-up run
            out[json.loads(m.read_text())["params"]["run_id"]] = m.parent
    return out


def test_interrupted_sweep_resumes_without_redoing_runs(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "resume")
    study = tmp_path / "out"
    proc = subprocess.Popen([*JUICE, "run", str(spec), "--results", str(study), "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    deadline = time.monotonic() + 240
    while not complete_runs(study) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert complete_runs(study), "no run completed before the deadline"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    first = complete_runs(study)
    if proc.returncode == 0:  # finished before the signal landed: nothing to resume
        assert len(first) == 3
    else:
        assert proc.returncode == 130, output
        assert 1 <= len(first) < 3
        print(f"interrupted after {len(first)} of 3 runs")
    assert not list(study.glob(".*.partial")), "an interrupted run left a partial directory"
    before = {k: (p, p.stat().st_ino, (p / "manifest.json").read_bytes()) for k, p in first.items()}

    cp = subprocess.run([*JUICE, "run", str(spec), "--results", str(study)], capture_output=True,
                        text=True, timeout=600, env=ENV)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert f"{len(first)} already complete" in cp.stderr + cp.stdout
    runs = complete_runs(study)
    # a warm-up run per deployment brought up: the resumed sweep brought it up again
    warm = sorted(study.glob("*.warmup"))
    assert len(warm) == (1 if proc.returncode == 0 else 2), [d.name for d in warm]
    first_point = {json.loads(m.read_text())["run_key"] for m in study.glob("*.warmup/manifest.json")}
    assert all(json.loads((d / "manifest.json").read_text())["warmup_run"] for d in warm)
    assert len(runs) == 3 and len(list(study.glob("*/manifest.json"))) == 3 + len(warm)  # none duplicated
    assert first_point <= set(runs)  # each warm-up ran a point of the spec, which still ran measured
    for k, (p, ino, manifest) in before.items():  # earlier runs untouched
        assert runs[k] == p and p.stat().st_ino == ino and (p / "manifest.json").read_bytes() == manifest
    assert (study / "report.html").is_file() and "report: " in cp.stdout
    html = (study / "report.html").read_text()
    assert "Resource profiles" in html and "Keystone and database CPU per site" in html
    assert "Server settings that differ from the shipped defaults" in html

    # a third invocation has nothing to do: no lab, no deployment
    cp = subprocess.run([*JUICE, "run", str(spec), "--results", str(study), "--no-report"],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0 and "0 to run" in cp.stderr + cp.stdout
    assert "deploying" not in cp.stderr + cp.stdout and "warm-up" not in cp.stderr + cp.stdout

    # what each run holds
    for p in runs.values():
        m = json.loads((p / "manifest.json").read_text())
        assert m["params"]["rdbms"] == "mariadb" and m["params"]["sites"] == 1
        assert m["versions"]["keystone"] and m["deployment"]["password_hash_rounds"] == 4
        assert m["deployment"]["prewarm"] is False  # the spec turned it off: recorded as such
        assert m["rwratio"]["reads"] > 0 and m["wan"]["backend"] in ("netem", "userspace")
        assert m["iterations"] == 3 and m["failed_iterations"] == 0
        assert m["order"]["warmup_runs"] == 1 and "warmup_run" not in m
        # no secret: the word appears only as the hashing rounds and the row count of Keystone's
        # password table (the servers' counters, issue 27)
        text = json.dumps(m).lower().replace("password_hash_rounds", "").replace("rows.password", "")
        assert "password" not in text
        rally = json.loads((p / "rally.json").read_text())
        assert rally["info"]["format_version"] == "1.2"
        assert len(rally["tasks"][0]["subtasks"][0]["workloads"][0]["data"]) == 3
        assert (p / "actions.parquet").is_file()
        # Keystone's own log during the run, and its WARNING/ERROR lines by template (issue 28)
        errs = json.loads((p / "server-errors.json").read_text())
        assert "keystone-s1.log" in errs["logs"] and (p / "logs" / "keystone-s1.log").is_file()
        assert isinstance(errs["errors"], list) and not [e for e in errs["errors"] if e["level"] != "WARNING"]
        # the servers' settings beyond their shipped defaults, with reasons (max_connections is
        # MariaDB's own: nothing in this spec sets it)
        devs = {(d["server"], d["option"]): d for d in m["deviations"]}
        assert devs[("mariadb", "character_set_server")]["default"] == "latin1"
        assert devs[("keystone", "[identity] password_hash_rounds")]["source"] == "spec"
        assert ("mariadb", "max_connections") not in devs and all(d["reason"] for d in devs.values())
        # the resource profile the runner samples around every run
        prof = m["profile"]
        assert prof["table"] == "profile.parquet" and prof["interval_s"] == 0.1 and prof["databases"] == 1
        assert {"keystone", "mariadb", "load-driver"} <= set(prof["components"]), prof
        table = pq.read_table(p / "profile.parquet").to_pandas()
        got = table.groupby(table["component"].astype(str))["metric"].agg(lambda m: set(m.astype(str)))
        assert {"cpu_user_s", "rss_bytes", "fds"} <= got["keystone"] and "db_reads" in got["mariadb"]
        assert {"cpu_user_s", "threads"} <= got["load-driver"] and "net_in_bytes" in got["link"]

    cp = subprocess.run([*JUICE, "analyze", str(study), "--json"], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    rows = json.loads(cp.stdout)
    ops = {r["operation"]: r for r in rows}
    assert ops["keystone_v3.fetch_token"]["count"] == 9  # 3 runs x 3 iterations: no warm-up run
    assert ops["keystone_v3.validate_token"]["failures"] == 0


def test_plan_shows_matrix_and_malformed_spec_is_one_line(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "plan", rdbms=["mariadb", "galera"], wan={"delay_ms": [0, 50]})
    cp = subprocess.run([*JUICE, "plan", str(spec)], capture_output=True, text=True, timeout=60,
                        cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert "12 runs" in cp.stdout and "estimated" in cp.stdout
    bad = spec_file(tmp_path, "bad", runner={"times": 3, "concurency": 1})
    for cmd in ("plan", "run"):
        cp = subprocess.run([*JUICE, cmd, str(bad)], capture_output=True, text=True, timeout=60)
        assert cp.returncode == 2
        lines = said_lines(cp.stderr)
        assert len(lines) == 1 and "runner.concurency" in lines[0] and "Traceback" not in cp.stderr
