"""Two studies given the same ``--results DIR`` keep their runs and reports apart: the first
writes into DIR as always, the second (DIR holding another study's runs) into DIR/<study>/,
and each one's report reads only its own runs; runs already in DIR stay found there."""

from __future__ import annotations

import json
from pathlib import Path

from juice import studies
from juice.sweep import sweep


def _run(root: Path, name: str, workload: str, key: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"workload": workload, "run_key": key}))
    return d


def test_a_fresh_or_own_directory_is_used_as_is(tmp_path: Path) -> None:
    msg = studies.get("messaging")
    assert sweep.results_for(msg, tmp_path / "new") == (tmp_path / "new", None)
    _run(tmp_path, "tc1-run", "messaging", "k1")
    _run(tmp_path, "x.failed", "messaging", "k2")
    assert sweep.results_for(msg, tmp_path) == (tmp_path, None)
    assert sweep.report_paths(msg, tmp_path) == [tmp_path]


def test_a_second_study_goes_to_its_own_subdirectory(tmp_path: Path) -> None:
    msg, nova = studies.get("messaging"), studies.get("nova")
    first = _run(tmp_path, "tc1-rabbitmq-0ms-0", "messaging", "k1")
    where, said = sweep.results_for(nova, tmp_path)
    assert where == tmp_path / "nova" and said is not None and "messaging" in said
    boot = _run(where, "boot-10-0", "nova", "n1")
    # again, with the nova runs there now: still there; messaging still at the top
    assert sweep.results_for(nova, tmp_path)[0] == tmp_path / "nova"
    assert sweep.results_for(msg, tmp_path) == (tmp_path, None)
    assert sweep.completed(msg, tmp_path) == {"k1": first}
    assert sweep.completed(nova, tmp_path / "nova") == {"n1": boot}
    # each report reads its own runs only: messaging's leaves nova/ out
    assert sweep.report_paths(msg, tmp_path) == [first]
    assert sweep.report_paths(nova, tmp_path / "nova") == [tmp_path / "nova"]
    # a third study: its own subdirectory too, and messaging's report leaves both out
    sdb = studies.get("scheduler-db")
    third = sweep.results_for(sdb, tmp_path)[0]
    assert third == tmp_path / sdb.name
    _run(third, "r-0", sdb.name, "s1")
    assert sweep.report_paths(msg, tmp_path) == [first]


def test_old_results_without_workload_stay_in_place(tmp_path: Path) -> None:
    """A manifest that names no study (earlier versions) is never taken for another study's."""
    d = tmp_path / "old-run"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"run_id": "abc"}))
    assert sweep.results_for(studies.get("messaging"), tmp_path) == (tmp_path, None)
