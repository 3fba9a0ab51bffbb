"""RemoteLab.check on shared hosts: a pair whose first round misses is probed once more and
judged on that round, with both medians in the record (the hosts here are stand-ins for the
ssh sessions: what is under test is the judging, not ssh)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from juice.lab import spec as labspec
from juice.lab.remote import RemoteLab


@dataclass
class FakeHost:
    address: str
    wan_address: str | None = None


Rounds = dict[tuple[int, int], list[list[float]]]  # (from site, to site) -> each round's RTTs


class FakeSession:
    def __init__(self, site: int, rounds: Rounds) -> None:
        self.site, self.rounds = site, rounds

    def tcp_ms(self, host: str, port: int, n: int = 1, timeout: float = 2.0) -> list[float] | None:
        series = self.rounds[(self.site, int(host.rsplit(".", 1)[1]))]
        return series.pop(0) if series else None


class FakeHosts:
    def __init__(self, sessions: dict[int, FakeSession]) -> None:
        self.sessions = sessions
        self.calls: list[list[int]] = []

    def each(self, phase: str, fn: Callable[[int, Any], Any],
             sites: Sequence[int] | None = None) -> dict[int, Any]:
        chosen = list(sites) if sites is not None else sorted(self.sessions)
        self.calls.append(chosen)
        return {k: fn(k, self.sessions[k]) for k in chosen}


def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rounds: Rounds) -> tuple[RemoteLab, FakeHosts]:
    monkeypatch.setenv("JUICE_WORK_DIR", str(tmp_path))
    ls = labspec.parse({"name": "reprobe", "sites": 3, "delay_ms": 20})  # 40 ms RTT expected
    hosts = FakeHosts({k: FakeSession(k, rounds) for k in (1, 2, 3)})
    rl = RemoteLab(ls, [FakeHost(f"10.0.0.{k}") for k in (1, 2, 3)], hosts, tmp_path)  # type: ignore[arg-type]
    rl.listen_ports = {1: 1, 2: 2, 3: 3}
    return rl, hosts


def test_a_pair_that_misses_once_is_judged_on_its_second_round_and_both_are_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = [40.2] * 10
    rounds = {(1, 2): [[55.0] * 10, good], (1, 3): [good], (2, 3): [good]}
    rl, hosts = lab(tmp_path, monkeypatch, rounds)
    rep = rl.check(probes=10, tol_ms=1.0)
    assert rep.ok, rep.to_dict()
    by = {(p.a, p.b): p for p in rep.pairs}
    assert by[(1, 2)].first_round_median_ms == 55.0 and by[(1, 2)].median_rtt_ms == 40.2
    assert by[(1, 2)].intermittent and not by[(1, 3)].intermittent
    assert by[(1, 3)].first_round_median_ms is None  # passed first time: probed once
    assert hosts.calls == [[1, 2], [1]]  # the second round probes only the missed pair's host


def test_a_pair_that_misses_twice_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = [40.0] * 10
    rounds = {(1, 2): [good], (1, 3): [[60.0] * 10, [58.0] * 10, good], (2, 3): [good]}
    rl, _ = lab(tmp_path, monkeypatch, rounds)
    rep = rl.check(probes=10, tol_ms=1.0)
    assert not rep.ok
    bad = [p for p in rep.pairs if not p.ok]
    assert [(p.a, p.b, p.first_round_median_ms, p.median_rtt_ms) for p in bad] == [(1, 3, 60.0, 58.0)]
    assert rep.to_dict()["pairs"][0]["first_round_median_ms"] is None


def test_a_local_lab_check_probes_a_missed_pair_again_but_not_a_cut_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from juice.lab import check as chk

    rounds: list[list[tuple[int, int]]] = []

    def fake_probe(lab: object, pairs: list[tuple[int, int]], *args: object) -> list[chk.PairResult]:
        rounds.append(list(pairs))
        first = len(rounds) == 1
        out = []
        for a, b in pairs:
            med = 9.0 if (a, b) == (1, 2) and first else 8.1
            cut = (a, b) == (2, 3)
            out.append(chk.PairResult(a, b, 8.0, None if cut else med, None, None, 3, 3, 0.5,
                                      ok=False if cut else abs(med - 8.0) <= 0.5, partitioned=cut))
        return out

    monkeypatch.setattr(chk, "_probe", fake_probe)
    lab = SimpleNamespace(sites=range(1, 4), topo=SimpleNamespace(name="l"),
                          state=SimpleNamespace(backend="b"))
    rep = chk.check(lab)  # type: ignore[arg-type]
    assert rounds == [[(1, 2), (1, 3), (2, 3)], [(1, 2)]]  # the cut pair's failure is a real one
    by = {(p.a, p.b): p for p in rep.pairs}
    assert by[(1, 2)].ok and by[(1, 2)].first_round_median_ms == 9.0 and not by[(2, 3)].ok


@pytest.mark.parametrize(("first", "why"), [
    ([30.0] * 10, "10 ms FASTER than the 40 ms expected: load never speeds packets up"),
    ([95.0] * 10, "55 ms late: beyond 10 tolerances and half the expected RTT"),
])
def test_a_first_miss_no_busy_host_explains_fails_even_when_the_second_round_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: list[float], why: str) -> None:
    good = [40.0] * 10
    rounds = {(1, 2): [first, good], (1, 3): [good], (2, 3): [good]}
    rl, _ = lab(tmp_path, monkeypatch, rounds)
    rep = rl.check(probes=10, tol_ms=1.0)
    by = {(p.a, p.b): p for p in rep.pairs}
    assert not rep.ok and not by[(1, 2)].ok and not by[(1, 2)].intermittent, why
    assert by[(1, 2)].first_round_median_ms == first[0] and by[(1, 2)].median_rtt_ms == 40.0
