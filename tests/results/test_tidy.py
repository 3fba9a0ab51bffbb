"""Tidy tables from run directories: rows, failed iterations, parameters, parquet cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from juice.errors import UserError
from juice.results import tidy
from tests.results.fake_runs import OPS, fake_params, write_fake_run


def test_one_row_per_action_per_iteration_children_and_failures_kept(tmp_path: Path) -> None:
    run = write_fake_run(tmp_path, "r1", fake_params(), n=30, fail_every=5, child=True)
    df = tidy.load([run.path])
    assert len(df) == 30 * (len(OPS) + 1)  # two ops + one child each iteration
    top = df[df["depth"] == 0]
    assert len(top) == 30 * len(OPS)
    child = df[df["depth"] == 1]
    assert set(child["parent"].astype(str)) == {OPS[0]}
    assert (child["operation"].astype(str) == "db.query").all()
    failed = df[df["iteration_failed"]]
    assert failed["iteration"].nunique() == run.failed_iterations == 6
    assert set(failed["error_type"].astype(str)) == {"ConflictError"}
    assert int(df["action_failed"].sum()) == run.failed_iterations  # the last action of each
    # durations are the ones drawn, in order
    ok = top[~top["action_failed"] & (top["operation"] == OPS[0])]
    assert np.allclose(ok["duration_s"].to_numpy()[:5], run.durations[OPS[0]][:5])


def test_a_failed_iteration_without_actions_still_has_a_row(tmp_path: Path) -> None:
    run = write_fake_run(tmp_path, "r1", fake_params(), n=12, fail_every=3, fail_before_actions=True)
    df = tidy.load([run.path])
    empty = df[df["operation"].isna()]
    assert len(empty) == run.failed_iterations == 4
    assert empty["iteration_failed"].all() and empty["duration_s"].isna().all()
    assert df.groupby(["site", "iteration"]).ngroups == 12


def test_params_are_columns_nested_flattened_unknown_kept(tmp_path: Path) -> None:
    p = fake_params(zones=["Z1", "Z1", "Z3"], extra={"knob": 3}, newthing="x")
    write_fake_run(tmp_path, "r1", p, n=3)
    write_fake_run(tmp_path, "r2", fake_params(rdbms="mariadb"), n=2)
    df = tidy.load([tmp_path])
    assert {"rdbms", "sites", "delay_ms", "extra.knob", "newthing", "zones"} <= set(tidy.param_columns(df))
    r1 = df[df["run"] == "r1"]
    assert json.loads(str(r1["zones"].iloc[0])) == ["Z1", "Z1", "Z3"]
    assert r1["extra.knob"].iloc[0] == 3
    assert df[df["run"] == "r2"]["newthing"].isna().all()  # absent there: NULL
    assert str(df["rdbms"].dtype) == "category"


def test_results_root_skips_failed_and_partial_runs_and_counts_them(tmp_path: Path) -> None:
    write_fake_run(tmp_path / "study", "ok", fake_params(), n=4)
    write_fake_run(tmp_path / "study", "bad.failed", fake_params(), n=4)
    write_fake_run(tmp_path / "study", ".half.partial", fake_params(), n=4)
    df = tidy.load([tmp_path])
    assert set(df["run"].astype(str)) == {"ok"}
    assert df.attrs["failed_runs"] == 1 and df.attrs["partial_runs"] == 1


def test_parquet_is_cached_and_rebuilt_when_the_run_changes(tmp_path: Path) -> None:
    run = write_fake_run(tmp_path, "r1", fake_params(), n=5)
    table = tidy.build_run_table(run.path)
    assert table == run.path / tidy.TABLE_NAME and table.is_file()
    assert not [p for p in run.path.iterdir() if p.name.endswith(".tmp")]
    first = table.stat().st_mtime_ns
    tidy.load([run.path])
    assert table.stat().st_mtime_ns == first  # fresh cache used as is
    lines = (run.path / "iterations.jsonl").read_text().splitlines()[:2]
    (run.path / "iterations.jsonl").write_text("\n".join(lines) + "\n")
    later = first / 1e9 + 5
    os.utime(run.path / "iterations.jsonl", (later, later))
    df = tidy.load([run.path])
    assert df["iteration"].nunique() == 2


def test_bad_inputs_are_one_line_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        tidy.load([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no complete run"):
        tidy.load([tmp_path / "empty"])
    run = write_fake_run(tmp_path, "r1", fake_params(), n=3)
    with (run.path / "iterations.jsonl").open("a") as f:
        f.write("{truncated\n")
    with pytest.raises(UserError, match=r"iterations.jsonl:4"):
        tidy.load([run.path])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UserError, match="notes.txt"):
        tidy.load([tmp_path / "notes.txt"])


def test_a_table_built_before_the_run_is_renamed_into_place_names_the_final_run(tmp_path: Path) -> None:
    run = write_fake_run(tmp_path, ".r1-20260101-000000.partial", fake_params(), n=3)
    tidy.build_run_table(run.path)
    final = tmp_path / "r1-20260101-000000"
    run.path.rename(final)
    df = tidy.load([final])
    assert set(df["run"].astype(str)) == {"r1-20260101-000000"}


def test_warmup_iterations_are_stored_but_left_out(tmp_path: Path) -> None:
    import json

    from juice.results import tidy

    run = tmp_path / "r"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"params": {"scenario": "s"}}))
    recs = [{"scenario": "s", "index": i, "site": 1, "timestamp": 1.0 + i, "duration": 0.1, "error": [],
             "atomic_actions": [{"name": "a", "started_at": 1.0 + i, "finished_at": 1.1 + i}]}
            for i in range(3)]
    recs.append({**recs[0], "index": 0, "warmup": True, "duration": 9.0})
    (run / "iterations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    df = tidy.load([run])
    assert len(df) == 3 and df["iteration_duration_s"].max() < 1.0
