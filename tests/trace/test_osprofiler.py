"""OSProfiler's spans mapped to the flow's milestones and phases, and compared with Juice's
(juice.trace.osprofiler), on traces recorded from a real run (fixtures/osprofiler_run.json:
4 boots at concurrency 2, nova 34, osprofiler 4.4.0; call arguments reduced to the uuids they
named). The headers Juice signs are checked with osprofiler's own code where its venv is."""

from __future__ import annotations

import json
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from juice.openstack.profiler import X_TRACE_HMAC, X_TRACE_INFO, trace_headers
from juice.trace import flow
from juice.trace import osprofiler as osp

FIXTURE = Path(__file__).parent / "fixtures" / "osprofiler_run.json"
ORDER = [m for m, _ in flow.PATH]
FULL = {"received", "cond_call", "sched_in", "sched_out", "cond_back", "dispatched", "compute_in", "done"}


@pytest.fixture(scope="module")
def rec() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def _ms(rec: dict[str, Any], boot: dict[str, str], by_uuid: bool = True) -> dict[str, float]:
    traces = rec["osprofiler"]["traces"]
    own = osp.spans_of(traces[boot["trace_id"]], boot["trace_id"])
    return osp.milestones(own, osp.all_spans(rec["osprofiler"]), boot["id"] if by_uuid else None)


def test_spans_pair_each_start_with_its_stop(rec: dict[str, Any]) -> None:
    for tid, notes in rec["osprofiler"]["traces"].items():
        spans = osp.spans_of(notes, tid)
        assert len(spans) == sum(1 for n in notes if n["name"].endswith("-start"))
        stopped = [s for s in spans if s.stop is not None]
        assert stopped and all(s.stop is not None and s.stop >= s.start for s in stopped)
        assert all(s.trace == tid for s in spans)
        assert [s.start for s in spans] == sorted(s.start for s in spans)


def test_every_boot_gets_the_flows_milestones_in_causal_order(rec: dict[str, Any]) -> None:
    for boot in rec["boots"]:
        ms = _ms(rec, boot)
        assert set(ms) == FULL, (boot["id"], sorted(ms))
        times = [ms[m] for m in ORDER if m in ms]
        assert all(b >= a for a, b in pairwise(times)), (boot["id"], ms)


def test_calls_filed_under_another_boots_trace_are_found_by_instance_uuid(rec: dict[str, Any]) -> None:
    """In the recorded run nova's RPC servers filed some boots' calls under the trace an
    earlier boot left in their thread: read from its own trace only, such a boot misses
    milestones or takes another boot's times; by uuid, every boot is whole."""
    every = osp.all_spans(rec["osprofiler"])
    misfiled = [b for b in rec["boots"] if osp.misfiled(b["trace_id"], every, b["id"])]
    assert misfiled and len(misfiled) < len(rec["boots"])
    for b in rec["boots"]:
        own = osp.spans_of(rec["osprofiler"]["traces"][b["trace_id"]], b["trace_id"])
        foreign = any(s.what.endswith(osp.FLOW_CALLS) and b["id"] not in s.text for s in own)
        clean = b not in misfiled and not foreign  # its trace holds its calls and only its own
        assert (_ms(rec, b, by_uuid=False) == _ms(rec, b)) == clean
        assert set(_ms(rec, b)) == FULL


def test_phases_are_compared_between_the_milestones_both_have() -> None:
    juice = {m: float(i) for i, m in enumerate(ORDER) if m not in flow.OPTIONAL}
    prof = {m: t + 100.0 for m, t in juice.items() if m not in ("claimed", "spawned")}  # another clock
    got = osp.common_phases(prof, juice)
    assert all(abs(o - j) < 1e-9 for o, j in got.values())  # durations do not see a clock offset
    assert ("compute_in", "done") in got and ("compute_in", "claimed") not in got
    prof["sched_in"] += 0.25  # OSProfiler sees the scheduler start later
    got = osp.common_phases(prof, juice)
    assert got[("cond_call", "sched_in")][0] - got[("cond_call", "sched_in")][1] == pytest.approx(0.25)
    assert got[("sched_in", "sched_out")][0] - got[("sched_in", "sched_out")][1] == pytest.approx(-0.25)


def test_the_table_of_the_recorded_run_covers_the_whole_boot(rec: dict[str, Any]) -> None:
    juice = rec["juice_milestones"]
    pairs = [("r", b["request_id"], _ms(rec, b), juice[b["request_id"]]) for b in rec["boots"]]
    table = osp.agreement(pairs)
    assert list(table.columns) == list(osp.COLUMNS)
    assert (table["boots"] == len(rec["boots"])).all()
    covered = [p for row in table["phase"] for p in row.split("+")]
    # each phase once, in order (no retry, no image fetch by the nodes in this recorded run)
    assert covered == [p for p in flow.PHASES if p not in ("retry", "image", "vif_plugged")]
    assert table["phase"].iloc[-1] == "claim+spawn+finish"  # OSProfiler has no claim/spawn span
    assert ((table["diff_median_lo_s"] <= table["diff_median_s"])
            & (table["diff_median_s"] <= table["diff_median_hi_s"])).all()
    assert ((table["absdiff_p95_lo_s"] <= table["absdiff_p95_s"])
            & (table["absdiff_p95_s"] <= table["absdiff_p95_hi_s"])).all()
    for row in table.itertuples(index=False):  # the medians are those of the pairs' differences
        diffs = [o - j for _, _, a, b in pairs for (f, t), (o, j) in osp.common_phases(a, b).items()
                 if (f, t) == (row[1], row[2])]
        assert row.diff_median_s == pytest.approx(float(pd.Series(diffs).median()))


def test_a_run_directory_is_matched_through_its_boots(rec: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / osp.FILE).write_text(json.dumps(rec["osprofiler"]))
    boots = pd.DataFrame(rec["boots"] + [{"request_id": "req-x", "trace_id": None, "id": "u"}])
    boots.to_parquet(tmp_path / "boots.parquet")
    juice = dict(rec["juice_milestones"])
    juice.pop(rec["boots"][0]["request_id"])  # one boot the logs did not trace
    table, counts = osp.compare([("run", tmp_path)], [])
    assert table.empty and counts.iloc[0]["matched"] == 0
    pairs, c = osp.run_pairs("run", tmp_path, juice)
    n = len(rec["boots"])
    assert c["boots"] == n and c["osprofiler_traced"] == n and c["matched"] == n - 1 == len(pairs)
    assert osp.load(tmp_path / "nothing") is None


def test_trace_headers_are_what_osprofiler_accepts() -> None:
    tid, h = trace_headers("k3y")
    assert set(h) == {X_TRACE_INFO, X_TRACE_HMAC}
    assert trace_headers("k3y", tid) == (tid, h)
    with pytest.raises(ValueError, match="key"):
        trace_headers("")
    py = Path("/var/cache/juice/openstack/bin/python")
    if not py.exists():
        pytest.skip("the OpenStack venv is not here (scripts/setup.sh)")
    code = ("import sys, json; from osprofiler import _utils as u; "
            "print(json.dumps(u.signed_unpack(sys.argv[1], sys.argv[2], [sys.argv[3]])))")
    ok = subprocess.run([str(py), "-c", code, h[X_TRACE_INFO], h[X_TRACE_HMAC], "k3y"],
                        capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(ok.stdout)
    assert data["base_id"] == tid and data["parent_id"] == tid
    bad = subprocess.run([str(py), "-c", code, h[X_TRACE_INFO], h[X_TRACE_HMAC], "other"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(bad.stdout) is None
