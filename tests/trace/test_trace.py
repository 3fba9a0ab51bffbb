"""Tracing real runs' logs (tests/fixtures/trace/: a nova run of 4 boots, and one with capacity
for 4 servers and 6 concurrent boots: 2 "No valid host"), and clock skew on shifted streams."""

from __future__ import annotations

from pathlib import Path

import pytest

from juice.trace import flow
from juice.trace.synth import replicate, shift_bytes, shift_run
from juice.trace.tables import run_clocks, trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trace"


def test_every_boot_reaches_the_terminal_state_the_api_returned() -> None:
    t = trace([FIX / "boot", FIX / "novalidhost"], workers=1)
    b = t.boots
    assert len(b) == 10 and b["terminal"].all() and b["matches_api"].all()
    s = t.summary.set_index("run")
    assert s.loc["boot", "active"] == 4 and s.loc["novalidhost", "no_valid_host"] == 2
    assert s.loc["novalidhost", "match_pct"] == 100.0 and s.loc["novalidhost", "failure_pct"] == 33.33
    # phases add up to the boot's time (active boots: POST received → instance.create.end)
    act = b[b["state"] == "active"]
    total = act[[f"{p}_s" for p in flow.PHASES]].sum(axis=1)
    assert ((total - act["duration_s"]).abs() < 1e-6).all()
    assert (act["scheduler_s"] > 0).all() and (act["spawn_s"] >= 0).all()
    assert set(t.phases["phase"]) >= {"api", "scheduler", "rpc_compute", "spawn", "finish"}


def test_error_classes_and_counts() -> None:
    t = trace([FIX / "novalidhost"], workers=1)
    f = t.faults
    assert int(f["count"].sum()) == 2 and set(f["state"]) == {"no_valid_host"}
    assert set(f["component"]) == {"conductor"}
    assert all(x.startswith("No valid host was found.") for x in f["fault"])
    e = t.errors
    assert e[(e["component"] == "conductor") & (e["level"] == "ERROR")]["count"].sum() == 2

    conflicts = t.errors[t.errors["template"].str.startswith("Failed to save allocation")]
    assert conflicts["component"].tolist() == ["scheduler"]          # claims lost to the other scheduler
    nvh = t.boots[t.boots["state"] == "no_valid_host"]
    assert (nvh["attempts"] == 0).all() and nvh["fault_component"].eq("conductor").all()


def test_unfit_requests_are_counted_not_dropped(tmp_path: Path) -> None:
    # the compute's log alone: no request starts a boot there except by its create.start
    d = tmp_path / "only"
    d.mkdir()
    (d / "juice-c1.log").write_bytes((FIX / "boot" / "logs" / "juice-c1.log").read_bytes())
    t = trace([d], workers=1)
    assert len(t.boots) == 4 and set(t.boots["state"]) == {"active"}
    (d / "juice-api.log").write_bytes((FIX / "boot" / "logs" / "juice-api.log").read_bytes())
    (d / "juice-c1.log").unlink()
    t = trace([d], workers=1)
    assert len(t.boots) == 4 and set(t.boots["state"]) == {"incomplete"}
    assert int(t.summary["incomplete"].iloc[0]) == 4 and int(t.summary["terminal"].iloc[0]) == 0


@pytest.mark.parametrize("truth", [{"site2": 0.75}, {"site1": -0.4, "site2": 2.5}])
def test_shifted_clocks_are_recovered_within_their_bounds(tmp_path: Path, truth: dict[str, float]) -> None:
    run = shift_run(FIX / "novalidhost", tmp_path / "run", truth)
    assert run_clocks(run)["juice-c1"] == "site2"
    raw = trace([run], correct=False, workers=1)
    assert raw.summary["pairs_violated_raw"].iloc[0] > 0                # the shift breaks causality…
    t = trace([run], workers=1)
    s = t.summary.iloc[0]
    assert s["pairs_violated_corrected"] == 0 and s["skew_reference"] == "client"
    sk = t.skew.set_index("clock")
    for clock in ("site1", "site2"):
        want = truth.get(clock, 0.0)
        got, lo, hi = sk.loc[clock, ["offset_s", "lo_s", "hi_s"]]
        assert lo - 1e-6 <= want <= hi + 1e-6, (clock, want, lo, hi)
        assert abs(got - want) <= (hi - lo) / 2 + 1e-6 and abs(got - want) < 0.05
    assert t.boots["matches_api"].all() and t.boots["anomalies"].eq(0).all()
    # …and with the correction the phases are those of the unshifted run
    ref = trace([FIX / "novalidhost"], workers=1).boots.set_index("request_id")["scheduler_s"]
    got_s = t.boots.set_index("request_id")["scheduler_s"]
    assert ((got_s - ref).abs().dropna() < 0.05).all()


def test_no_skew_switch_keeps_raw_times(tmp_path: Path) -> None:
    run = shift_run(FIX / "boot", tmp_path / "run", {"site2": -1.0})
    t = trace([run], correct=False, workers=1)
    assert not t.summary["skew_applied"].iloc[0]
    assert (t.events["t"] == t.events["t_raw"]).all()
    assert t.boots["anomalies"].gt(0).any()                              # compute before its dispatch


def test_shift_moves_text_and_notification_timestamps() -> None:
    line = next(ln for ln in (FIX / "boot" / "logs" / "juice-c1.log").read_bytes().splitlines()
                if b"instance.create.end" in ln)
    out = shift_bytes(line, 1.5)
    assert out[:23] != line[:23] and b'"timestamp": "2026-11-22 21:07:02.7' in out
    assert shift_bytes(b'{"created": 100.25, "x": 1}', -0.25) == b'{"created": 100.0, "x": 1}'


def test_replicated_logs_trace_like_the_original(tmp_path: Path) -> None:
    replicate(FIX / "novalidhost", tmp_path / "rep", copies=3)
    t = trace([tmp_path / "rep"], workers=2)
    assert len(t.boots) == 18
    assert t.boots["state"].value_counts().to_dict() == {"active": 12, "no_valid_host": 6}


def test_forked_nodes_logs_are_computes_on_their_site(tmp_path: Path) -> None:
    import json

    from juice.trace.parse import stream_component

    # computes.isolation fork: each node's nova-compute logs to juice-c<k>-n<j>.log
    assert stream_component("juice-c1-n0002") == "compute" and stream_component("juice-c12") == "compute"
    d = tmp_path / "fork"
    d.mkdir()
    for f in (FIX / "boot" / "logs").iterdir():
        (d / f.name.replace("juice-c1", "juice-c1-n0000")).write_bytes(f.read_bytes())
    t = trace([d], workers=1)
    assert len(t.boots) == 4 and set(t.boots["state"]) == {"active"}
    assert "claim" in set(t.phases["phase"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"deployment": {"computes": {
        "sites": [2, 3], "nodes_per_process": 2, "isolation": "fork"}}}))
    clocks = run_clocks(run)
    assert {k: v for k, v in clocks.items() if k.startswith("juice-c")} == {
        "juice-c1": "site2", "juice-c1-n0000": "site2", "juice-c1-n0001": "site2",
        "juice-c2": "site3", "juice-c2-n0000": "site3", "juice-c2-n0001": "site3"}
