"""``juice lab check``: measure the RTT of every pair of sites and compare with the spec.

Each unordered pair {a, b} is probed with ``ping`` from a to b (many probes per pair, pairs
in parallel up to a bound). The expected RTT is the sum of the two one-way delays; a pair
passes when its median RTT is within max(tolerance_ms, tolerance_pct of the expected).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Protocol

from juice.lab import netns
from juice.lab.spec import Link, expected_rtt_ms
from juice.lab.state import LabState
from juice.lab.topology import Topology
from juice.util.jsontypes import JSONObject

TIME_RE = re.compile(r"time=([0-9.]+) ms")
MAX_PARALLEL = 48


@dataclass(frozen=True)
class PairResult:
    a: int
    b: int
    expected_rtt_ms: float
    median_rtt_ms: float | None
    p99_rtt_ms: float | None
    min_rtt_ms: float | None
    sent: int
    received: int
    tolerance_ms: float
    ok: bool
    partitioned: bool = False
    # A pair that missed on its first round is probed once more and judged on BOTH rounds
    # (with_second_round): the first round's median is kept here, and ``intermittent`` says
    # the pair passed only on its second round.
    first_round_median_ms: float | None = None
    intermittent: bool = False


@dataclass(frozen=True)
class CheckReport:
    lab: str
    backend: str
    probes: int
    pairs: list[PairResult]
    started_at: float
    duration_s: float

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.pairs)

    def to_dict(self) -> JSONObject:
        d: JSONObject = asdict(self)
        d["ok"] = self.ok
        d["rtt_unit"] = "ms (round trip; the spec's delays are one-way)"
        return d


def tolerance(expected_ms: float, tol_ms: float, tol_pct: float) -> float:
    return max(tol_ms, expected_ms * tol_pct / 100.0)


def parse_ping(output: str) -> list[float]:
    """RTTs (ms) of the replies in iputils ping output."""
    return [float(m) for m in TIME_RE.findall(output)]


def judge(a: int, b: int, expected: float, rtts: list[float], sent: int,
          tol_ms: float, tol_pct: float) -> PairResult:
    tol = tolerance(expected, tol_ms, tol_pct)
    if not rtts:
        return PairResult(a, b, expected, None, None, None, sent, 0, tol, False)
    srt = sorted(rtts)
    med = statistics.median(srt)
    p99 = srt[min(len(srt) - 1, int(round(0.99 * (len(srt) - 1))))]
    # Every probe must come back unless the spec asks for loss.
    ok = abs(med - expected) <= tol
    return PairResult(a, b, expected, round(med, 3), round(p99, 3), round(srt[0], 3), sent,
                      len(rtts), round(tol, 3), ok)


class Probed(Protocol):
    """What ``check`` reads of a local lab (``LocalLab``)."""

    links: dict[tuple[int, int], Link]
    state: LabState
    topo: Topology

    @property
    def sites(self) -> range: ...

    def site_ns(self, site: int) -> str: ...

    def site_ip(self, site: int) -> str: ...


def check(lab: Probed, *, probes: int = 30, interval_s: float = 0.01,
          tol_ms: float = 0.5, tol_pct: float = 2.0,
          progress: Callable[[str], None] = lambda _: None) -> CheckReport:
    """Probe every pair of sites of ``lab``; bounded in time (each ping has a deadline). A pair
    that misses its tolerance is probed once more and judged on both rounds
    (:func:`with_second_round`), its first median kept in ``first_round_median_ms``."""
    pairs = [(a, b) for a in lab.sites for b in lab.sites if a < b]
    started = time.time()
    t0 = time.monotonic()
    out = with_second_round(pairs, lambda ps: _probe(lab, ps, probes, interval_s, tol_ms, tol_pct, progress),
                            progress)
    return CheckReport(lab.topo.name, lab.state.backend, probes, out, started,
                       round(time.monotonic() - t0, 2))


GROSS_TOL = 10.0   # a first-round excess above this many tolerances ...
GROSS_FRAC = 0.5   # ... and above this share of the expected RTT is a fault, not a busy host


def load_explains(first: PairResult) -> bool:
    """Whether a first round's miss is what a busy host does: replies LATE by a bounded
    amount. Load never makes packets faster, so a median below expected − tolerance (traffic
    that bypassed the delay, a short delay) is a fault; so is an excess beyond both
    ``GROSS_TOL`` tolerances and ``GROSS_FRAC`` of the expected RTT; so are no replies."""
    m = first.median_rtt_ms
    if m is None:
        return False
    excess = m - first.expected_rtt_ms
    return excess >= -first.tolerance_ms and excess <= max(GROSS_TOL * first.tolerance_ms,
                                                           GROSS_FRAC * first.expected_rtt_ms)


def with_second_round(pairs: list[tuple[int, int]],
                      probe: Callable[[list[tuple[int, int]]], list[PairResult]],
                      progress: Callable[[str], None] = lambda _: None) -> list[PairResult]:
    """``probe(pairs)``, then once more for the pairs that missed (a cut pair's failure is
    real: not again); sorted by pair. Both rounds decide: a pair that missed passes only when
    its second round is within tolerance AND its first miss is one a busy host explains
    (:func:`load_explains`); it is then marked ``intermittent`` (shown by ``juice lab check``
    and kept in the manifests' ``wan.check``), with the first median kept."""
    results = {(r.a, r.b): r for r in probe(pairs)}
    missed = sorted(k for k, r in results.items() if not r.ok and not r.partitioned)
    if missed:
        progress(f"probing {len(missed)} pair(s) again")
        for r in probe(missed):
            first = results[(r.a, r.b)]
            ok = r.ok and load_explains(first)
            results[(r.a, r.b)] = replace(r, first_round_median_ms=first.median_rtt_ms, ok=ok,
                                          intermittent=ok)
    return sorted(results.values(), key=lambda r: (r.a, r.b))


def _probe(lab: Probed, pairs: list[tuple[int, int]], probes: int, interval_s: float, tol_ms: float,
           tol_pct: float, progress: Callable[[str], None]) -> list[PairResult]:
    results: list[PairResult] = []
    todo = list(pairs)
    running: list[tuple[int, int, subprocess.Popen[str]]] = []
    while todo or running:
        while todo and len(running) < MAX_PARALLEL:
            a, b = todo.pop(0)
            exp = expected_rtt_ms(lab.links, a, b)
            deadline = int(probes * interval_s + 3 * exp / 1000 + 5)
            if a in lab.state.partitioned or b in lab.state.partitioned:
                deadline = 2
            argv = netns.exec_argv(lab.site_ns(a), [
                "ping", "-n", "-c", str(probes), "-i", f"{interval_s:g}", "-w", str(deadline),
                "-W", "2", lab.site_ip(b)])
            running.append((a, b, subprocess.Popen(argv, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True)))
        a, b, p = running.pop(0)
        out, _ = p.communicate(timeout=600)
        res = judge(a, b, expected_rtt_ms(lab.links, a, b), parse_ping(out), probes, tol_ms, tol_pct)
        if a in lab.state.partitioned or b in lab.state.partitioned:
            # A cut-off site must be unreachable: that is what passing means for it.
            res = replace(res, partitioned=True, ok=res.received == 0)
        results.append(res)
        progress(f"probed {len(results)}/{len(pairs)} pairs")
    return results
