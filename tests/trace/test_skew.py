"""Clock skew of seconds, in both directions, several computes at different offsets: real nova
runs' logs (tests/fixtures/trace/) laid out as plain directories (one file per service), the
compute's instances dealt out to three hosts (synth.split_compute), every file of a host shifted
by a known offset, as oslo.log text and as oslo.log JSON (clocks then from the records' hostname)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from juice.errors import UserError
from juice.trace import skew
from juice.trace.clocks import parse_clock_args
from juice.trace.synth import shift_bytes, split_compute, to_json
from juice.trace.tables import trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trace"
HOSTS = ["cmp1", "cmp2", "cmp3"]
CASES = [   # seconds ahead of the truth, per host ("ctl": api, conductor, schedulers)
    {"ctl": 0.0, "cmp1": -5.0, "cmp2": 2.5, "cmp3": 5.0, "plc": -1.2},
    {"ctl": 0.7, "cmp1": 4.2, "cmp2": -3.3, "cmp3": 0.3, "plc": 1.9},
    {"ctl": -2.0, "cmp1": 0.05, "cmp2": -0.05, "cmp3": -4.9, "plc": 0.0},
]


def _host(stream: str) -> str:
    return stream if stream in HOSTS else "plc" if stream == "placement" else "ctl"


def _layout(run: str, dest: Path, shifts: dict[str, float], fmt: str) -> Path:
    split = split_compute(FIX / run / "logs", dest / "split", "juice-c1", HOSTS)
    assert all(split[h] for h in HOSTS)          # every host has instances
    out = dest / fmt
    out.mkdir()
    for f in sorted((dest / "split").iterdir()):
        data = shift_bytes(f.read_bytes(), shifts[_host(f.stem)])
        (out / f.name).write_bytes(to_json(data, _host(f.stem)) if fmt == "json" else data)
    return out


def _check(t: object, shifts: dict[str, float], clock_name: dict[str, str]) -> None:
    sk: pd.DataFrame = t.skew  # type: ignore[attr-defined]
    s = t.summary.iloc[0]  # type: ignore[attr-defined]
    ref = s["skew_reference"]
    ref_host = next(h for h, c in clock_name.items() if c == ref)
    assert s["pairs_violated_raw"] > 0 and s["pairs_violated_corrected"] == 0
    rows = sk.set_index("clock")
    assert set(rows.index) == set(clock_name.values())
    for host, clock in clock_name.items():
        want = shifts[host] - shifts[ref_host]                   # offsets are relative to the reference
        got, lo, hi = (float(x) for x in rows.loc[clock, ["offset_s", "lo_s", "hi_s"]])
        assert math.isfinite(lo) and math.isfinite(hi) and bool(rows.loc[clock, "applied"])
        assert lo - 1e-6 <= want <= hi + 1e-6, (clock, want, lo, hi)
        assert abs(got - want) <= (hi - lo) + 1e-6, (clock, want, got, lo, hi)
    assert t.boots["anomalies"].eq(0).all()  # type: ignore[attr-defined]


@pytest.mark.parametrize("shifts", CASES)
@pytest.mark.parametrize("run", ["boot", "novalidhost"])
def test_text_logs_with_hosts_shifted_by_seconds(tmp_path: Path, run: str, shifts: dict[str, float]) -> None:
    d = _layout(run, tmp_path, shifts, "text")
    ctl = [f.stem for f in d.iterdir() if _host(f.stem) == "ctl"]
    t = trace([d], workers=1, clocks={s: "ctl" for s in ctl})
    _check(t, shifts, {"ctl": "ctl", "plc": "placement", **{h: h for h in HOSTS}})
    # the same boots and states as the unshifted run's logs, phases within the bounds' width
    ref = trace([FIX / run], workers=1).boots.set_index("request_id")
    got = t.boots.set_index("request_id")
    assert sorted(got["state"]) == sorted(ref["state"])
    width = float(t.skew["width_s"].max())
    assert ((got["scheduler_s"] - ref["scheduler_s"]).abs().dropna() <= width).all()
    c = t.clocks.set_index("stream")
    assert c.loc["juice-api", "why"] == "--clock" and "juice-conductor" in c.loc["juice-api", "shares_with"]
    assert c.loc["cmp1", "why"].startswith("own file")


@pytest.mark.parametrize("shifts", CASES[:2])
def test_json_logs_are_grouped_into_clocks_by_hostname(tmp_path: Path, shifts: dict[str, float]) -> None:
    d = _layout("novalidhost", tmp_path, shifts, "json")
    assert (d / "juice-api.log").read_text().startswith("{")
    t = trace([d], workers=1)                                   # no --clock: the records say
    _check(t, shifts, {h: f"host:{h}" for h in ("ctl", "plc", *HOSTS)})
    c = t.clocks.set_index("stream")
    assert c.loc["juice-sched-2", "clock"] == "host:ctl"
    assert c.loc["juice-sched-2", "why"] == "JSON hostname ctl"
    assert set(c.loc["juice-api", "shares_with"].split(",")) == {"juice-conductor", "juice-sched-1",
                                                                 "juice-sched-2"}
    assert sorted(t.boots["state"]) == ["active"] * 4 + ["no_valid_host"] * 2


def test_every_file_its_own_clock_one_sided_bounds_are_not_applied(tmp_path: Path) -> None:
    """The issue's first case: true offsets 0, a file per clock. The API's clock has pairs in one
    direction only (nothing comes back to it): it is reported unbounded, not moved, and the
    output says which pair would bound it; every clock bounded on both sides contains 0."""
    d = tmp_path / "logs"
    d.mkdir()
    for f in (FIX / "boot" / "logs").iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    t = trace([d], workers=1)
    sk = t.skew.set_index("clock")
    api = sk.loc["juice-api"]
    assert api["how"] == "unbounded above" and api["offset_s"] == 0.0 and not api["applied"]
    assert math.isinf(api["hi_s"]) and "juice-api" in api["needs"] and "--clock" in api["needs"]
    two = sk[sk["how"] == "midpoint"]
    assert len(two) >= 2 and ((two["lo_s"] <= 1e-9) & (two["hi_s"] >= -1e-9)).all()
    assert (two["offset_s"].abs() <= two["width_s"]).all()
    s = t.summary.iloc[0]
    assert s["pairs_violated_corrected"] == 0 and "juice-api" in s["skew_note"]
    assert t.boots["anomalies"].eq(0).all() and set(t.boots["state"]) == {"active"}


def test_a_one_sided_clock_is_moved_only_as_far_as_causality_demands() -> None:
    # B is only ever told things by R (no reply): o_B ≤ 0.3 − 2.0 + resolution; raw B runs early
    pairs = [skew.Pair("R", 10.0, "B", 8.3, "r → b"), skew.Pair("R", 20.0, "B", 18.5, "r → b"),
             skew.Pair("R", 1.0, "C", 1.1, "r → c"), skew.Pair("C", 1.2, "R", 1.25, "c → r")]
    sk = skew.estimate(pairs, lambda s: s, "R")
    b = sk.clocks["B"]
    assert b.how.startswith("unbounded below") and math.isinf(b.lo_s) and b.applied
    assert b.offset_s == pytest.approx(b.hi_s) and b.hi_s == pytest.approx(-1.7 + skew.RESOLUTION_S)
    assert "from B back to R" in b.needs
    assert skew.violations(pairs, {c: sk.offset(c) for c in "RBC"}) == 0
    c = sk.clocks["C"]
    assert c.how == "midpoint" and c.lo_s <= 0.0 <= c.hi_s


def test_the_reference_moves_into_the_group_bounded_on_both_sides() -> None:
    pairs = [skew.Pair("api", 0.0, "X", 0.1, "api → x"), skew.Pair("X", 0.2, "Y", 0.3, "x → y"),
             skew.Pair("Y", 0.4, "X", 0.5, "y → x")]
    sk = skew.estimate(pairs, lambda s: s, "api")
    assert sk.reference in ("X", "Y") and "api is bounded on one side only" in sk.note
    assert sk.clocks["api"].how == "unbounded above" and sk.offset("api") == 0.0


def test_inconsistent_pairs_name_the_cycle_and_correct_nothing() -> None:
    pairs = [skew.Pair("A", 0.0, "B", -1.0, "a → b"), skew.Pair("B", 0.0, "A", -1.0, "b → a")]
    sk = skew.estimate(pairs, lambda s: s, "A")
    assert not sk.consistent and "A, B" in sk.note and sk.offset("B") == 0.0


def test_clock_arguments(tmp_path: Path) -> None:
    assert parse_clock_args(["nova-api,nova-conductor.log=ctl", "c7=host7"]) == {
        "nova-api": "ctl", "nova-conductor": "ctl", "c7": "host7"}
    f = tmp_path / "clocks.yaml"
    f.write_text("ctl: [nova-api.log, nova-scheduler.log]\nhost7: nova-compute-7.log\n")
    assert parse_clock_args([str(f)]) == {"nova-api": "ctl", "nova-scheduler": "ctl",
                                          "nova-compute-7": "host7"}
    with pytest.raises(UserError, match="--clock"):
        parse_clock_args(["nonsense"])
    with pytest.raises(UserError, match="no log file named nova-typo"):
        trace([FIX / "boot" / "logs"], workers=1, clocks={"nova-typo": "x"})


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("dt", [0.3, 2.0, -5.0])
def test_lines_shifted_without_their_notification_timestamps(tmp_path: Path, dt: float, fmt: str) -> None:
    """The issue's second case: the controllers one clock, the compute's lines shifted but not
    the UTC timestamps inside its notifications (a tool shifting line prefixes, or a host writing
    local time): each file is timed by its lines alone, so the shift is found, not "inconsistent"."""
    d = tmp_path / "logs"
    d.mkdir()
    for f in (FIX / "novalidhost" / "logs").iterdir():
        data = shift_bytes(f.read_bytes(), dt if f.stem == "juice-c1" else 0.0, payloads=False)
        host = "c1" if f.stem == "juice-c1" else "ctl"
        (d / f.name).write_bytes(to_json(data, host) if fmt == "json" else data)
    clocks = None if fmt == "json" else {s: "ctl" for s in ("juice-api", "juice-conductor", "juice-sched-1",
                                                            "juice-sched-2", "placement")}
    t = trace([d], workers=1, clocks=clocks)
    c1 = "host:c1" if fmt == "json" else "juice-c1"
    _check(t, {"ctl": 0.0, "c1": dt}, {"ctl": "host:ctl" if fmt == "json" else "ctl", "c1": c1})
    assert bool(t.summary["skew_applied"].iloc[0])


def test_a_rescheduled_boot_pairs_each_selection_with_the_host_it_names() -> None:
    """Attempt 1 on host A (the super-conductor's choice), attempt 2 on B (the cell conductor's):
    B's clock 5 s behind puts its build first in raw time; pairs still follow the host names."""
    from juice.trace.flow import Trace
    from juice.trace.parse import Event

    def ev(t: float, stream: str, kind: str, host: str | None = None, value: float | None = None) -> Event:
        return Event(t=t, stream=stream, component=stream.split("-")[0], kind=kind, greq=None,
                     req="req-1", uuid="u", level="INFO", host=host, value=value)

    events = [ev(10.0, "super-conductor", "conductor.scheduled", value=0.5),
              ev(10.1, "super-conductor", "conductor.selected", host="A"),
              ev(10.2, "compute-A", "compute.create.start", host="A"),
              ev(10.9, "cell-conductor", "conductor.selected", host="B"),
              ev(11.0 - 5.0, "compute-B", "compute.create.start", host="B")]
    tr = Trace(rid="req-1", uuid="u", attempts=2, events=sorted(events, key=lambda e: e.t))
    got = {(p.a_stream, p.b_stream) for p in skew.pairs_of(tr) if "compute (cast)" in p.what}
    assert got == {("super-conductor", "compute-A"), ("cell-conductor", "compute-B")}
