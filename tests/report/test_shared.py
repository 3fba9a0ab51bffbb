"""The frame's shared report sections (``juice.report.shared``): made for every study from what
its run directories hold, once each, never wired by a study (issue 39)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from juice import studies
from juice.report import shared
from tests.report.synth import messaging_results
from tests.results.fake_runs import fake_params, write_fake_run
from tests.studies.nova.test_config_key import write_run

T0 = 1_700_000_000.0
DEVIATION = {"server": "mariadb", "option": "max_connections", "value": "500", "default": "151",
             "reason": "boots at concurrency 60", "source": "juice"}


def nova_iterations(d: Path, n: int = 40) -> None:
    """Rally-style boot iterations (``nova.boot_server``), two sites, 1 s apart."""
    lines = []
    for i in range(n):
        t = T0 + i
        failed = 10 <= i < 20 and i % 2 == 1  # site 2 fails during the fault
        acts = [{"name": "nova.boot_server", "started_at": t, "finished_at": t + 0.8, "failed": failed,
                 "children": []}]
        lines.append({"scenario": "NovaServers.boot_server", "site": 1 + i % 2, "index": i, "timestamp": t,
                      "duration": 0.8, "idle_duration": 0.0, "error": ["Fault", "x", ""] if failed else [],
                      "atomic_actions": acts})
    (d / "iterations.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def add(d: Path, **fields: Any) -> None:
    m = json.loads((d / "manifest.json").read_text())
    m.update(fields)
    (d / "manifest.json").write_text(json.dumps(m))


def nova_runs(root: Path) -> tuple[Path, Path]:
    write_run(root, "boot_server-c60-r0", 1, 20, "fork", mean=5.0, key="k0")
    write_run(root, "boot_server-c60-r1", 1, 20, "fork", mean=5.2, rep=1, key="k1")
    a, b = root / "boot_server-c60-r0", root / "boot_server-c60-r1"
    for i, d in enumerate((a, b)):
        nova_iterations(d)
        add(d, deviations=[DEVIATION], order_index=i, order={"deployment": 0, "position": i},
            sla={"pass": True, "results": [{"criterion": "failure_rate", "success": True, "detail": "ok"}]})
    (a / "events.jsonl").write_text(json.dumps(
        {"index": 0, "description": "at 10 s: partition site 2", "t_start": T0 + 10, "t_end": T0 + 20,
         "detail": {"site": 2}}) + "\n")
    (b / "server-errors.json").write_text(json.dumps({"errors": [
        {"log": "nova-api.log", "component": "nova-api", "level": "WARNING", "template": "slow <n>",
         "count": 3, "example": "slow 3"}]}))
    return a, b


SHARED_HEADINGS = ("SLA", "Faults", "Server settings that differ from the shipped defaults",
                   "Resource profiles", "Servers: WARNING/ERROR lines by message template",
                   "nova: request tracing from logs (seed 004)")


def headings(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<h[23]>(.*?)</h[23]>", html)]


def test_a_nova_report_with_a_fault_schedule_shows_the_fault_timeline(tmp_path: Path) -> None:
    a, _ = nova_runs(tmp_path / "nova")
    html = (studies.report([tmp_path / "nova"], tmp_path / "r.html")).read_text()
    assert html.count("<h2>Faults</h2>") == 1
    assert f"<h3>Faults in {a.name}</h3>" in html and "at 10 s: partition site 2" in html
    start = html.index("<h2>Faults</h2>")
    assert "<figure>" in html[start:] and "λ during" in html[start:]
    # the frame's other sections, from what the runs hold, each once
    hs = headings(html)
    for h in ("SLA", "Faults", "Server settings that differ from the shipped defaults",
              "Servers: WARNING/ERROR lines by message template"):
        assert hs.count(h) == 1, (h, hs)
    assert "Run order: 2 runs in the order they ran" in html
    assert html.index("<h3>SLA</h3>") < html.index("<h2>Faults</h2>") < html.index("Server settings")


def test_no_section_appears_twice_and_absent_data_renders_nothing(tmp_path: Path) -> None:
    nova_runs(tmp_path / "nova")
    messaging_results(tmp_path / "msg", agents=(10,), delays=(0.0,), reps=1)
    ks = tmp_path / "ks"
    for rep in range(2):
        write_fake_run(ks, f"ks-r{rep}", fake_params(repetition=rep), seed=rep)
    html = studies.report([tmp_path / "nova", tmp_path / "msg", ks], tmp_path / "r.html").read_text()
    hs = headings(html)
    # one Faults section (nova's); no study's data for traces or profiles: none drawn
    assert hs.count("Faults") == 1
    assert "Resource profiles" not in hs and "nova: request tracing from logs (seed 004)" not in hs
    for h in SHARED_HEADINGS:
        assert hs.count(h) <= 1, (h, hs)


def test_runs_with_events_but_no_iterations_show_the_events(tmp_path: Path) -> None:
    root = messaging_results(tmp_path / "msg", agents=(10,), delays=(0.0,), reps=1,
                             local={"rabbitmq-federation": 1.0})
    d = sorted(p for p in root.iterdir() if p.is_dir())[0]
    add(d, run_key="m0")  # a run of the study (synth leaves the key out)
    (d / "events.jsonl").write_text(json.dumps(
        {"index": 0, "description": "at 2 s: kill rabbitmq in site 1", "t_start": 102.0, "t_end": 104.0,
         "detail": {}}) + "\n")
    html = studies.report([root], tmp_path / "r.html").read_text()
    assert html.count("<h2>Faults</h2>") == 1 and f"<h3>Faults in {d.name}</h3>" in html
    assert "at 2 s: kill rabbitmq in site 1" in html


def test_a_registered_provider_reaches_every_study(tmp_path: Path) -> None:
    nova_runs(tmp_path / "nova")

    def count(runs: shared.StudyRuns) -> list[str]:
        return [f"<p class=note>frame saw {len(runs.dirs)} runs</p>"] if runs.dirs else []

    shared.register(count)
    try:
        html = studies.report([tmp_path / "nova"], tmp_path / "r.html").read_text()
    finally:
        shared.AFTER.remove(count)
    assert html.count("frame saw 2 runs") == 1
    assert html.index("frame saw 2 runs") < html.index("Server settings")


def test_the_hosts_calibration_is_shown_or_its_absence_said(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The frame shows the run-to-run calibration verdicts lean on (juice calibrate), per host."""
    from juice.compare.calibration import Entry, Store
    from juice.contract import ReportInput

    run = tmp_path / "r1"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"workload": "keystone", "host": {"hostname": "h1"},
                                                   "params": {"delay_ms": 0.0}}))
    runs = shared.StudyRuns(ReportInput([tmp_path], tmp_path / "r.html"), owns=lambda m: True)
    cal = tmp_path / "cal"
    monkeypatch.setenv("JUICE_CALIBRATION_DIR", str(cal))
    (none,) = shared.calibration(runs)
    assert "Run-to-run calibration of h1: none for this study" in none
    store = Store.load("h1")
    store.add([Entry("keystone", {"workload": "keystone", "delay_ms": "0.0"}, "iteration", "mean", 0.062,
                     0.01, 0.2, 9, True, "2026-11-27T10:00:00Z", "x")])
    store.save()
    (shown,) = shared.calibration(shared.StudyRuns(ReportInput([tmp_path], tmp_path / "r.html"),
                                                   owns=lambda m: True))
    assert "Run-to-run calibration of h1 (1 entries)" in shown and "6.2%" in shown and "fresh" in shown
