"""Clock-skew correction from happens-before pairs across hosts (seed 004's "causal constraint
heuristics", made exact).

    pairs = [p for tr in traces for p in pairs_of(tr)]          # (a happened before b)
    sk = estimate(pairs, clock_of, reference="client")          # offsets and their bounds
    events = apply(events, sk.offset_of_stream(clock_of))       # corrected times

Each clock ``X`` has an unknown offset ``o_X`` (its reading minus the true time). A pair "a on
clock A happened before b on clock B" (an RPC sent → received, an HTTP request sent → handled,
a reply handled → the caller resumes) says ``t_b − o_B ≥ t_a − o_A``, i.e.
``o_B − o_A ≤ t_b − t_a``: a difference constraint. All pairs make a constraint graph (edge
A→B of weight min(t_b − t_a)); shortest paths from the reference R (offset 0) bound every
clock: ``o_X ∈ [−d(X→R), d(R→X)]``. Pairs in both directions between two clocks (a call and its
reply) bound both sides; the width is at least the round trip of the fastest exchange, so the
accuracy scales with the WAN delay (a one-way delay δ gives a width ≥ 2δ; the midpoint is exact
when the two directions are equally fast). The offset chosen is the midpoint of each clock's
bounds, clocks fixed one at a time (tightest first) so the chosen offsets satisfy every pair.
A clock with one side unbounded takes its finite bound (the fastest pair taken as instantaneous)
and is marked so; an inconsistent system (a negative cycle: clocks drifting during the logs, or
lines misassigned to clocks) is reported and left uncorrected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from juice.trace.flow import Trace
from juice.trace.parse import Event

RESOLUTION_S = 0.001     # text timestamps are cut to the millisecond: slack per constraint
INF = math.inf


@dataclass(frozen=True)
class Pair:
    """``a`` happened before ``b`` (raw local times, streams name their clocks)."""

    a_stream: str
    a_t: float
    b_stream: str
    b_t: float
    what: str


@dataclass
class ClockBound:
    clock: str
    offset_s: float            # chosen: local − true
    lo_s: float
    hi_s: float
    pairs: int
    how: str                   # "midpoint" | "lower bound" | "upper bound" | "unbounded" | "reference"

    @property
    def width_s(self) -> float:
        return self.hi_s - self.lo_s


@dataclass
class Skew:
    reference: str
    clocks: dict[str, ClockBound] = field(default_factory=dict)
    consistent: bool = True
    note: str = ""
    enabled: bool = True

    def offset(self, clock: str) -> float:
        b = self.clocks.get(clock)
        return b.offset_s if (b is not None and self.enabled and self.consistent) else 0.0

    def rows(self) -> list[dict[str, object]]:
        return [{"clock": b.clock, "offset_s": b.offset_s, "lo_s": b.lo_s, "hi_s": b.hi_s,
                 "width_s": b.width_s, "pairs": b.pairs, "how": b.how, "reference": self.reference,
                 "applied": self.enabled and self.consistent} for b in self.clocks.values()]


def _first(tr: Trace, kind: str, pred: Callable[[Event], bool] | None = None) -> Event | None:
    for e in tr.events:
        if e.kind == kind and (pred is None or pred(e)):
            return e
    return None


def pairs_of(tr: Trace) -> list[Pair]:
    """The happens-before pairs one boot's events give (first attempt)."""
    out: list[Pair] = []

    def add(a: Event | None, b: Event | None, what: str, a_t: float | None = None) -> None:
        if a is not None and b is not None and a.stream != b.stream:
            out.append(Pair(a.stream, a.t if a_t is None else a_t, b.stream, b.t, what))

    recv = _first(tr, "api.received")
    cond = _first(tr, "conductor.scheduled")
    cond_call = None if cond is None else cond.t - (cond.value or 0.0)
    s_in = _first(tr, "scheduler.received") or _first(tr, "scheduler.start")
    s_out = _first(tr, "scheduler.end") or _first(tr, "scheduler.selected")
    cand = _first(tr, "placement.candidates")
    claiming = _first(tr, "scheduler.claiming")
    claim = _first(tr, "placement.claim", lambda e: (e.value or 0) < 300)
    s_sel = _first(tr, "scheduler.selected")
    selected = _first(tr, "conductor.selected")
    c_start = _first(tr, "compute.create.start")
    claimed = _first(tr, "compute.claimed")
    add(recv, cond, "api → conductor (cast)", None)
    if recv is not None and cond is not None and cond_call is not None:
        out[-1] = Pair(recv.stream, recv.t, cond.stream, cond_call, "api → conductor (cast)")
    add(recv, s_in, "api → scheduler (via conductor)")
    if cond is not None and cond_call is not None and s_in is not None and cond.stream != s_in.stream:
        out.append(Pair(cond.stream, cond_call, s_in.stream, s_in.t, "conductor → scheduler (call)"))
    add(s_out, cond, "scheduler → conductor (reply)")
    add(s_in, cand, "scheduler → placement (GET /allocation_candidates)")
    add(cand, claiming or s_sel, "placement → scheduler (candidates returned)")
    add(claiming, claim, "scheduler → placement (PUT /allocations)")
    add(claim, s_sel or s_out, "placement → scheduler (claim returned)")
    add(selected, c_start, "conductor → compute (cast)")
    if claim is not None and c_start is not None and claimed is not None and tr.attempts == 1:
        # the compute's placement calls (another address than the scheduler's claim): the first
        # (GET /allocations/<uuid>) is made inside the claim, every later one after it
        calls = [e for e in tr.events if e.kind.startswith("placement.") and e.peer != claim.peer]
        if calls:
            add(c_start, calls[0], "compute → placement (GET /allocations)")
            add(calls[0], claimed, "placement → compute (allocations returned)")
        if len(calls) > 1:
            add(claimed, calls[1], "compute → placement (after the claim)")
    return out


def estimate(pairs: Iterable[Pair], clock_of: Callable[[str], str], reference: str | None = None) -> Skew:
    """Offsets per clock, relative to ``reference`` (default: the clock in most pairs)."""
    w: dict[tuple[str, str], float] = {}
    count: dict[str, int] = {}
    for p in pairs:
        a, b = clock_of(p.a_stream), clock_of(p.b_stream)
        if a == b:
            continue
        d = p.b_t - p.a_t + RESOLUTION_S
        if d < w.get((a, b), INF):
            w[(a, b)] = d
        count[a] = count.get(a, 0) + 1
        count[b] = count.get(b, 0) + 1
    clocks = sorted(count)
    if not clocks:
        return Skew(reference=reference or "-", note="no cross-clock pair: nothing to correct")
    ref = reference if reference in count else max(clocks, key=lambda c: count[c])
    dist = _floyd(clocks, w)
    if any(dist[c][c] < -1e-9 for c in clocks):
        sk = Skew(reference=ref, consistent=False,
                  note="inconsistent pairs (a negative cycle): clocks drift or streams are mixed; "
                       "not corrected")
        for c in clocks:
            sk.clocks[c] = ClockBound(c, 0.0, -dist[c][ref], dist[ref][c], count[c], "inconsistent")
        return sk
    bounds = {c: (-dist[c][ref], dist[ref][c]) for c in clocks}
    chosen: dict[str, float] = {ref: 0.0}
    how: dict[str, str] = {ref: "reference"}
    order = sorted((c for c in clocks if c != ref), key=lambda c: bounds[c][1] - bounds[c][0])
    for c in order:
        lo, hi = -dist[c][ref], dist[ref][c]
        if math.isfinite(lo) and math.isfinite(hi):
            v, h = (lo + hi) / 2.0, "midpoint"
        elif math.isfinite(lo):
            v, h = lo, "lower bound"
        elif math.isfinite(hi):
            v, h = hi, "upper bound"
        else:
            v, h = 0.0, "unbounded"
        chosen[c], how[c] = v, h
        if h != "unbounded":
            w[(ref, c)] = min(w.get((ref, c), INF), v)
            w[(c, ref)] = min(w.get((c, ref), INF), -v)
            dist = _floyd(clocks, w)
    sk = Skew(reference=ref)
    for c in clocks:
        lo, hi = bounds[c]
        sk.clocks[c] = ClockBound(c, chosen[c], lo, hi, count[c], how[c])
    return sk


def _floyd(clocks: Sequence[str], w: Mapping[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    d = {a: {b: (0.0 if a == b else w.get((a, b), INF)) for b in clocks} for a in clocks}
    for k in clocks:
        dk = d[k]
        for i in clocks:
            dik = d[i][k]
            if dik == INF:
                continue
            di = d[i]
            for j in clocks:
                v = dik + dk[j]
                if v < di[j]:
                    di[j] = v
    return d


def apply(events: Iterable[Event], offsets: Mapping[str, float]) -> list[Event]:
    """Events with ``t`` corrected (``t − offset`` of their stream's clock)."""
    out = []
    for e in events:
        o = offsets.get(e.stream, 0.0)
        out.append(replace(e, t=e.t - o) if o else e)
    return out


def violations(pairs: Iterable[Pair], offsets: Mapping[str, float]) -> int:
    """Pairs whose corrected times still run backwards (beyond the logs' resolution)."""
    def late(p: Pair) -> bool:
        return p.b_t - offsets.get(p.b_stream, 0.0) < p.a_t - offsets.get(p.a_stream, 0.0) - RESOLUTION_S

    return sum(1 for p in pairs if late(p))
