"""``juice trend``: same configuration from stored parameters, time order, a planted step found
between the right runs, nothing flagged on a flat series; ``--json``/``--html``; compare --html."""

from __future__ import annotations

import copy
import datetime as dt
import json
import platform
import re
from pathlib import Path

import numpy as np
import pytest

from juice.analysis.runlevel import UNKNOWN
from juice.compare.calibration import Entry, Store, measure
from juice.compare.metadata import FAILURE, config_of
from juice.compare.trend import trend
from juice.errors import UserError
from juice.results.samples import Unit, from_iterations, units
from tests.sla.test_cli_sla import OLD, RALLY_FILE, juice

SHIFT = 0.05  # s added to every duration of the runs after the planted step

# what would load something: a source or link to a URL, a CSS url() or @import
FETCH = re.compile(r"(src|href)\s*=\s*[\"']?https?:|url\(\s*[\"']?https?:|@import", re.I)


def _run(name: str, t: float, values: np.ndarray, fails: int = 0, **params: object) -> Unit:
    its = [{"timestamp": t + i, "duration": float(v), "error": [], "atomic_actions": []}
           for i, v in enumerate(values)]
    its += [{"timestamp": t + len(values) + i, "duration": 0.1, "error": ["E", "x", ""],
             "atomic_actions": []} for i in range(fails)]
    return from_iterations(Unit(name, Path(name), "juice",
                                meta={"workload": "keystone", "params": params, "started_at": t}), its)


def _series(step_at: int | None, n_runs: int = 5, seed: int = 11) -> list[Unit]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_runs):
        v = rng.gamma(4.0, 0.01, 300) + (SHIFT if step_at is not None and i >= step_at else 0.0)
        # names in reverse time order and a differing run_id: order and grouping come from
        # the stored time and parameters, not from names
        out.append(_run(f"run-{n_runs - i}", 1_800_000_000.0 + 3600 * i, v, rdbms="galera",
                        run_id=f"id{i}", repetition=i))
    return out


def _calibrated(tmp_path: Path) -> Store:
    """This host's calibration: 12 A/A runs of the series' configuration, measured."""
    store = Store.load("h", tmp_path)
    store.add(measure(_series(step_at=None, n_runs=12, seed=99), fresh=True))
    return store


def test_steps_have_no_verdict_without_a_calibration() -> None:
    (s,) = trend(_series(step_at=3))
    timed = [st for st in s.steps if st.metric != FAILURE]
    assert timed and {st.verdict for st in timed} == {UNKNOWN}
    # no failure in any run: 0 % against 0 % is no change whatever the spread
    assert {(st.verdict, st.delta) for st in s.steps if st.metric == FAILURE} == {("within noise", 0.0)}


def test_a_planted_step_is_found_between_the_right_runs(tmp_path: Path) -> None:
    runs = _series(step_at=3)
    (s,) = trend(runs, calibration=_calibrated(tmp_path))
    assert [r.time for r in s.runs] == sorted(r.time for r in s.runs)
    assert "run_id" not in s.config and "repetition" not in s.config and s.config["rdbms"] == "galera"
    real = {(st.metric, st.stat, st.before, st.after) for st in s.steps if st.verdict == "real"}
    assert real == {("iteration", "mean", 2, 3)}
    # a p95 step (one run against one) is never judged: a run's p95 is heavy-tailed between runs
    assert {st.verdict for st in s.steps if st.stat == "p95"} == {UNKNOWN}
    (mean,) = [st for st in s.steps if (st.metric, st.stat, st.before) == ("iteration", "mean", 2)]
    assert mean.lo <= SHIFT <= mean.hi
    for p in s.points:
        assert p.lo <= p.value <= p.hi or p.metric == FAILURE


def test_a_flat_series_has_no_step_and_configurations_stay_apart(tmp_path: Path) -> None:
    flat = _series(step_at=None)
    other = _run("x", 1_800_000_000.0, np.full(50, 0.2), rdbms="mariadb")
    out = trend([*flat, other], calibration=_calibrated(tmp_path))
    assert [len(s.runs) for s in out] == [len(flat), 1]
    assert all(st.verdict == "within noise" for s in out for st in s.steps if st.stat == "mean")
    assert all(st.verdict == UNKNOWN for s in out for st in s.steps if st.stat == "p95")
    assert config_of(other)["rdbms"] == "mariadb" and out[1].steps == []


def test_failure_percent_follows_the_failed_iterations(tmp_path: Path) -> None:
    good = [_run(f"r{i}", 1e9 + i, np.full(100, 0.1), fails=f) for i, f in enumerate((0, 0, 60))]
    store = Store.load("h", tmp_path)
    store.add([Entry("keystone", config_of(good[0]), FAILURE, "mean", float("nan"), 2.0, 1.0, 10,
                     True, "2026-11-27T00:00:00Z", "")])  # failures: an absolute spread (2 points)
    (s,) = trend(good, calibration=store)
    pts = [p for p in s.points if p.metric == FAILURE]
    assert [p.value for p in pts] == [100.0 * f / (100 + f) for f in (0, 0, 60)]
    real = [(st.before, st.after) for st in s.steps if st.metric == FAILURE and st.verdict == "real"]
    assert real == [(1, 2)]


def test_a_run_without_time_is_refused() -> None:
    u = _run("r", 0.0, np.ones(3))
    u.meta.pop("started_at")
    with pytest.raises(UserError, match="no start time"):
        trend([u])


def _rally_copies(tmp_path: Path, shifts: list[float]) -> list[Path]:
    doc = json.loads(RALLY_FILE.read_text())
    out = []
    for i, shift in enumerate(shifts):
        d = copy.deepcopy(doc)
        w = d["tasks"][0]["subtasks"][0]["workloads"][0]
        w["created_at"] = (dt.datetime(2026, 1, 1) + dt.timedelta(days=i)).isoformat()
        for it in w["data"]:
            it["duration"] += shift
        p = tmp_path / f"night-{len(shifts) - i}.json"  # names against time order
        p.write_text(json.dumps(d))
        out.append(p)
    return out


def test_cli_on_rally_files_json_and_html(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _rally_copies(tmp_path, [0.0, 0.0, SHIFT, SHIFT])
    page = tmp_path / "trend.html"
    cp = juice("trend", *map(str, reversed(files)))
    assert cp.returncode == 0, cp.stderr
    assert "steps without a verdict" in cp.stdout and "juice calibrate" in cp.stdout
    # this host calibrated once: 1 % run-to-run CV on every statistic of that configuration
    first = units([files[0]])
    cal = Store.load("h", tmp_path / "cal")
    cal.add(Entry("rally", config_of(first[0]), m, st, 0.01, float("nan"), 1.0, 10, True,
                  "2026-11-27T00:00:00Z", "") for m in first[0].samples for st in ("mean", "p95"))
    cal.path = tmp_path / "cal" / f"{platform.node()}.json"  # Rally files name no host: this one
    cal.save()
    monkeypatch.setenv("JUICE_CALIBRATION_DIR", str(tmp_path / "cal"))
    cp = juice("trend", *map(str, reversed(files)), "--json", "--html", str(page))
    assert cp.returncode == 0, cp.stderr
    (s,) = json.loads(cp.stdout)["series"]
    assert [r["path"] for r in s["runs"]] == [str(p) for p in files]
    real = {(st["metric"], st["stat"], st["before"]) for st in s["steps"] if st["verdict"] == "real"}
    assert ("iteration", "mean", 1) in real and all(b == 1 for _, _, b in real)
    html = page.read_text()
    assert "<script" not in html and not FETCH.search(html)  # self-contained (SVG namespaces aside)
    metrics = {p["metric"] for p in s["points"]}
    assert html.count("<figure>") == len(metrics)
    cp = juice("trend", *map(str, files))
    assert cp.returncode == 0, cp.stderr
    assert f"between run 2 ({units([files[1]])[0].name}) and run 3" in cp.stdout


def test_cli_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    cp = juice("trend", str(tmp_path / "nope"))
    assert cp.returncode == 2 and "no such file" in cp.stderr
    cp = juice("trend", str(RALLY_FILE), "--html", str(tmp_path / "no" / "x.html"))
    assert cp.returncode == 2 and "does not exist" in cp.stderr


def test_compare_html_has_metadata_first_tables_and_paired_figures(tmp_path: Path) -> None:
    a, b = (sorted(OLD.glob(f"create_user_update_password-galera-3s-{d}-*"))[0] for d in ("0ms", "50ms"))
    page = tmp_path / "cmp.html"
    cp = juice("compare", str(a), str(b), "--html", str(page), "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    html = page.read_text()
    assert "<script" not in html and not FETCH.search(html)
    assert html.index("What differs") < html.index("Differences") < html.index("<figure>")
    assert "params.delay_ms" in html
    metrics = {d["metric"] for d in doc["deltas"]}
    assert html.count("<figure>") == len(metrics)
    assert html.count("<tr>") - 1 >= len(doc["deltas"]) + len(doc["differs"])
