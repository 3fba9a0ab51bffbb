"""End to end with real servers (MariaDB, memcached): a small study (N = 1K..3K, 1 and 3
schedulers, updates off/on) is stored completely, a failed point is kept as ``.failed`` and
never counted, a rerun measures only what is missing, a third run measures nothing, and the
fits/crossings are computed from what was stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from juice.studies.schedulerdb import STUDY, report, spec, study
from juice.studies.schedulerdb.backends import BackendSession
from juice.studies.schedulerdb.fit import fit
from juice.sweep import sweep
from tests.services.conftest import needs_lab

pytestmark = needs_lab

SMALL = {"workload": "scheduler-db", "name": "small", "backends": ["mariadb", "memcached"],
         "tracks": ["historical-2013.1"], "nodes": {"start": 1000, "stop": 3000, "step": 1000},
         "schedulers": [1, 3], "updates": [False, True], "repetitions": 1, "warmup_s": 0.3,
         "update_workers": 2, "lab": {"sites": 1, "delay_ms": 0}, "threshold_s": 60}


def run_study(s: spec.SchedulerDbSpec, data: dict[str, object], root: Path,
              progress: Callable[[str], None]) -> Path:
    """`juice run` of ``s`` into ``root`` (the study directory)."""
    sweep.run(STUDY, s, dict(data), json.dumps(data), root, progress)
    return root


def _dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def test_small_study_complete_resumable_never_half_written(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    s = spec.parse(SMALL, "small.yaml")
    points = s.points()
    assert len(points) == 24
    root = tmp_path / "results" / "small"
    log: list[str] = []

    # 1) the 3rd point fails while it is being written: kept as .failed, the study stops.
    calls = {"n": 0}
    real_versions = BackendSession.versions

    def failing_versions(self: BackendSession) -> dict[str, str]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("injected failure")
        return real_versions(self)

    monkeypatch.setattr(BackendSession, "versions", failing_versions)
    with pytest.raises(RuntimeError, match="injected"):
        run_study(s, SMALL, root, log.append)
    monkeypatch.undo()
    names = _dirs(root)
    assert len([n for n in names if n.endswith(".failed")]) == 1
    assert len([n for n in names if not n.endswith(".failed")]) == 2
    assert not list(root.glob(".*.partial"))
    assert len(sweep.completed(STUDY, root)) == 2

    # 2) the rerun measures exactly the 22 missing points.
    log.clear()
    run_study(s, SMALL, root, log.append)
    assert "2 already complete, 22 to run" in log[0]
    done = sweep.completed(STUDY, root)
    assert set(done) == {study.point_key(s, p) for p in points}
    complete = [n for n in _dirs(root) if not n.endswith(".failed")]
    assert len(complete) == 24  # no duplicate
    assert sorted(d.name for d in done.values()) == sorted(complete)
    for name in complete:  # every complete run has all its files
        d = root / name
        m = json.loads((d / "manifest.json").read_text())
        p = m["params"]
        reads = pd.read_parquet(d / "reads.parquet")
        assert len(reads) == p["schedulers"] * spec.reps_for(s, p)
        assert reads["ok"].all(), reads["error"].tolist()
        assert (reads["nodes"] == p["nodes"]).all()
        want_rows = p["nodes"] * 10 if p["backend"] == "mariadb" else p["nodes"]
        assert (reads["rows_returned"] == want_rows).all()
        assert (reads["objects"] == p["nodes"]).all()
        upd = json.loads((d / "updates.json").read_text())
        if p["updates"]:
            assert upd["target_rate"] == pytest.approx(p["nodes"] / 60)
            assert upd["count"] > 0 and upd["achieved_rate"] > 0
        else:
            assert upd["count"] == 0
        assert m["versions"]["mariadbd" if p["backend"] == "mariadb" else "memcached"] != "absent"

    # 3) a third run measures nothing and changes nothing (no lab is even started).
    before = _dirs(root)
    log.clear()
    run_study(s, SMALL, root, log.append)
    assert log == [f"24 runs in the matrix: 24 already complete, 0 to run → {root}"]
    assert _dirs(root) == before

    # 4) fits and crossings from the stored runs.
    summ = report.summary([root])
    confs = summ["configurations"]
    assert len(confs) == 8 and summ["runs"] == 24
    reads_all, _, _ = report.load([root])
    for c in confs:
        g = reads_all[(reads_all["backend"] == c["backend"]) & (reads_all["schedulers"] == c["schedulers"])
                      & (reads_all["updates"] == c["updates"])]
        f = fit(g["nodes"].tolist(), g["seconds"].tolist(), 1)
        assert c["linear"]["r2"] == pytest.approx(f.r2, abs=1e-4)
        n = c["linear"]["crossing_n"]
        if n is not None:
            assert float(f.predict([n])[0]) == pytest.approx(60.0, rel=1e-3)
    html = report.section([root])
    assert html is not None and "Figure 1" in html and "Figure 5" in html and "crossing" in html


def test_postgres_hand_join_and_modern_schema(tmp_path: Path) -> None:
    """PostgreSQL: the 2013.2 three-SELECT read, and nova's real schema (nova-manage db sync in
    the OpenStack venv) read the modern way, placement candidates capped."""
    from juice.studies.schedulerdb import modern

    if not modern.nova_manage().exists():
        pytest.skip(f"{modern.nova_manage()} missing: run scripts/setup.sh")
    data = {"workload": "scheduler-db", "name": "pg", "backends": ["postgres"],
            "tracks": ["historical-2013.2", "modern"], "nodes": [200, 500], "schedulers": [1],
            "updates": [False, True], "repetitions": 1, "warmup_s": 0.2, "update_workers": 2,
            "candidates": 300, "lab": {"sites": 1, "delay_ms": 0}}
    s = spec.parse(data, "pg.yaml")
    root = run_study(s, data, tmp_path / "results" / "pg", lambda _: None)
    reads, upd, mans = report.load([root])
    assert len(mans) == len(s.points()) == 8
    assert reads["ok"].all(), reads["error"].tolist()
    for r in reads.to_dict("records"):
        n = r["nodes"]
        if r["track"] == "historical-2013.2":  # nodes + services + 10 stats per node
            assert r["rows_returned"] == n + n + 10 * n and r["objects"] == n
        else:  # every service + the candidates' nodes (at most `candidates`)
            assert r["objects"] == min(n, 300) and r["rows_returned"] == n + min(n, 300)
    man = next(m for m in mans if m["params"]["track"] == "modern")
    assert man["layout"]["schema"]["nova_version"].startswith("34.")
    assert (upd[upd["updates"]]["count"] > 0).all()


def test_mysql_clients_read_the_same_rows(tmp_path: Path) -> None:
    """MariaDB read with PyMySQL and with mysqlclient (the C MySQLdb): the same rows and node
    objects, the client recorded in params, reads and the report's configurations; the
    default client's run keeps the pre-axis run name."""
    data = {"workload": "scheduler-db", "name": "cl", "backends": ["mariadb"],
            "tracks": ["historical-2013.1", "historical-2013.2"], "nodes": [1000],
            "clients": ["pymysql", "mysqlclient"], "schedulers": [1], "updates": [False],
            "repetitions": 1, "lab": {"sites": 1, "delay_ms": 0}}
    s = spec.parse(data, "cl.yaml")
    root = run_study(s, data, tmp_path / "results" / "cl", lambda _: None)
    reads, _, mans = report.load([root])
    assert len(mans) == 4
    assert sorted(m["params"]["client"] for m in mans) == ["mysqlclient", "mysqlclient", "pymysql", "pymysql"]
    assert all(m["versions"]["mysqlclient"] != "absent" for m in mans)
    assert reads["ok"].all(), reads["error"].tolist()
    for track, want_rows in (("historical-2013.1", 10_000), ("historical-2013.2", 1000 + 1000 + 10_000)):
        g = reads[reads["track"] == track].set_index("client")
        assert g.loc["pymysql", "rows_returned"] == g.loc["mysqlclient", "rows_returned"] == want_rows
        assert g.loc["pymysql", "objects"] == g.loc["mysqlclient", "objects"] == 1000
    names = _dirs(root)
    assert sum(n.endswith("-mysqlclient") or "-mysqlclient-" in n for n in names) == 2
    labels = [report._label(c) for c in report.summary([root])["configurations"]]
    assert sum("mariadb/mysqlclient" in x for x in labels) == 2
    assert sum("mariadb/pymysql" in x for x in labels) == 2
