"""One-way times across hosts whose clocks differ (seconds apart, both signs): corrected with
each host's recorded offset, carrying the offsets' bound, withheld when the bound exceeds the
delay; one clock (a local lab) leaves every time as recorded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from juice.profile.clocks import Clocks
from juice.studies.messaging import metrics

# the three hosts: clocks -0.51 s, +0.04 s and +2.44 s from Juice's
SKEW = {1: -0.51, 2: 0.04, 3: 2.44}
DELAY = {(a, b): 0.0004 if a == b else 0.025 + 0.005 * abs(a - b) for a in SKEW for b in SKEW}  # true, s


def _records(n: int = 60, seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, tuple[int, int]]]:
    """Casts from clients at every site to servers at every site, each time stamped on its
    own host's (skewed) clock; the true one-way time of each message, by id."""
    rng = np.random.default_rng(seed)
    t0 = 1_800_000_000.0
    sends, recvs, truth = [], [], {}
    for i in range(n):
        a, b = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        true_send = t0 + i * 0.05
        mid = f"c{a}:{i}"
        sends.append({"id": mid, "cli": f"c{a}", "site": a, "topic": "t", "m": "cast",
                      "t_int": true_send + SKEW[a], "t_send": true_send + SKEW[a],
                      "t_done": true_send + SKEW[a] + 0.001, "ok": True, "err": None, "srv": None,
                      "t_srv": None})
        recvs.append({"id": mid, "srv": f"s{b}", "site": b, "t": true_send + DELAY[(a, b)] + SKEW[b],
                      "sent": None})
        truth[mid] = (a, b)
    return (pd.DataFrame(sends, columns=metrics.SEND_COLS), pd.DataFrame(recvs, columns=metrics.RECV_COLS),
            truth)


def _clocks(err_s: float = 0.0003, rtt_s: float = 0.002) -> Clocks:
    """The offsets as the profile measures them: within +- RTT/2 of the truth."""
    return Clocks({k: (v + (err_s if k % 2 else -err_s), rtt_s / 2) for k, v in SKEW.items()})


def test_corrected_one_way_times_recover_the_true_ones() -> None:
    s, r, truth = _records()
    m = metrics.messages(s, r, {"t": 1}, warmup_until=0.0, clocks=_clocks()).set_index("id")
    raw = metrics.messages(s, r, {"t": 1}, warmup_until=0.0).set_index("id")
    for mid, (a, b) in truth.items():
        got, bound = float(m.loc[mid, "oneway_s"]), float(m.loc[mid, "oneway_bound_s"])
        assert abs(got - DELAY[(a, b)]) <= bound + 1e-6, (mid, a, b, got, bound)  # epoch floats: ~0.2 us
        if a == b:  # one host, one clock: exact and no bound
            assert bound == 0 and got == pytest.approx(DELAY[(a, b)], abs=1e-6)
        else:
            assert bound == pytest.approx(0.002)
            # uncorrected, the skew dominates: e.g. host 3 -> host 1 is about -2.9 s
            assert abs(float(raw.loc[mid, "oneway_s"]) - DELAY[(a, b)]) > 0.5
    summ = metrics.summarize(m.reset_index(), r, window_s=3.0)
    true_p50 = float(np.median([DELAY[v] for v in truth.values()])) * 1000
    assert summ["oneway_p50_ms"] == pytest.approx(true_p50, abs=2.0)
    assert summ["oneway_bound_ms"] == pytest.approx(2.0) and "oneway_withheld" not in summ


def test_both_signs_host3_to_host1_and_back() -> None:
    """The issue's case: host 3's clock 2.44 s ahead, host 1's 0.51 s behind."""
    s, r, truth = _records(n=200)
    m = metrics.messages(s, r, {"t": 1}, warmup_until=0.0, clocks=_clocks(err_s=0.0))
    m["pair"] = [truth[i] for i in m["id"]]
    for pair in ((3, 1), (1, 3)):
        got = m[m["pair"] == pair]["oneway_s"]
        assert len(got) and np.allclose(got, DELAY[pair], atol=1e-6)


def test_withheld_when_the_bound_exceeds_the_delay() -> None:
    s, r, _ = _records()
    summ = metrics.summarize(metrics.messages(s, r, {"t": 1}, 0.0, clocks=_clocks(rtt_s=0.2)), r, 3.0)
    assert summ["oneway_p50_ms"] is None and summ["oneway_p99_ms"] is None
    assert summ["oneway_withheld"].startswith("withheld: clock offset bound 200 ms > one-way p50 ")
    assert summ["oneway_bound_ms"] == pytest.approx(200.0)


def test_a_host_without_offset_withholds_cross_host_times() -> None:
    s, r, _ = _records()
    clocks = Clocks({k: (v, 0.001) for k, v in SKEW.items() if k != 3})
    m = metrics.messages(s, r, {"t": 1}, 0.0, clocks=clocks)
    summ = metrics.summarize(m, r, 3.0)
    assert summ["oneway_p50_ms"] is None and "not measured" in summ["oneway_withheld"]
    col, lat = metrics.latencies(m)
    assert col == "oneway_s" and lat.empty


def test_one_clock_leaves_times_as_recorded() -> None:
    s, r, _ = _records()
    s["site"], r["site"] = 1, 2  # every site on this machine's clock: times are true already
    r["t"] = s["t_send"].astype(float) + 0.025
    plain = metrics.messages(s, r, {"t": 1}, 0.0)
    local = metrics.messages(s, r, {"t": 1}, 0.0, clocks=Clocks(one_clock=True))
    pd.testing.assert_series_equal(plain["oneway_s"], local["oneway_s"])
    assert (local["oneway_bound_s"] == 0).all()
    summ = metrics.summarize(local, r, 3.0)
    assert summ["oneway_p50_ms"] == pytest.approx(25.0) and "oneway_withheld" not in summ


def test_clocks_from_a_stored_profile() -> None:
    prof: dict[str, Any] = {"source": "hosts", "clock_offsets": {"1": {"offset_s": -0.51, "rtt_s": 0.002},
                                                                 "2": {"offset_s": None, "rtt_s": None}}}
    c = Clocks.from_profile(prof)
    assert c is not None and c.of(1) == (-0.51, 0.001) and c.of(2) is None
    local = Clocks.from_profile({"source": "local"})
    assert local is not None and local.of(5) == (0.0, 0.0)
    assert Clocks.from_profile(None) is None
