"""Clock-skew correction from happens-before pairs across clocks (seed 004's "causal constraint
heuristics", made exact), for offsets of milliseconds or of seconds, in either direction.

    pairs = [p for tr in traces for p in pairs_of(tr)]          # (a happened before b)
    sk = estimate(pairs, clock_of, reference="client")          # offsets and their bounds
    events = apply(events, {s: sk.offset(clock_of(s)) for s in streams})   # corrected times

Each clock ``X`` has an unknown offset ``o_X`` (its reading minus the true time). A pair "a on
clock A happened before b on clock B" (an RPC sent → received, an HTTP request sent → handled,
a reply handled → the caller resumes) says ``t_b − o_B ≥ t_a − o_A``, i.e.
``o_B − o_A ≤ t_b − t_a``: a difference constraint. All pairs make a constraint graph (edge
A→B of weight min(t_b − t_a)); shortest paths from the reference R (offset 0) bound every
clock: ``o_X ∈ [−d(X→R), d(R→X)]``. Pairs in both directions between two clocks (a call and its
reply) bound both sides; the width is at least the round trip of the fastest exchange, so the
accuracy scales with the WAN delay (a one-way delay δ gives a width ≥ 2δ; the midpoint is exact
when the two directions are equally fast). Nothing here depends on the size of the offsets.

Pairs are formed by what the lines say, never by the raw order of events across clocks: the
request id and instance (the trace), the message (a conductor's "Selected host: H" is cast to
the compute whose notifications name host H, matched in each clock's own order), the peer
address (a compute's placement calls are not the scheduler's).

The reference is a clock of the largest group bounded on both sides (a strongly connected part
of the graph: the given reference when it is in it, else the clock in most pairs there). Each
clock bounded on both sides takes the midpoint (tightest first, each choice pinned so the rest
stay consistent). A clock bounded on one side only (``lo = −inf`` or ``hi = +inf``) is reported
as unbounded and not applied (offset 0) — unless its raw times break the one bound there is,
then it is moved by the least shift that restores causal order — and ``needs`` says which pair
would bound it. An inconsistent system (a negative cycle: clocks drifting during the logs, or
lines assigned to the wrong clock) is reported with the clocks on the cycle and left uncorrected.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

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
    how: str                   # "reference" | "midpoint" | "unbounded below" | "unbounded above" | …
    applied: bool = True       # False: the offset is not used (unbounded on a side, inconsistent)
    needs: str = ""            # for a clock bounded on one side: the pair that would bound it

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
        use = b is not None and b.applied and self.enabled and self.consistent
        return b.offset_s if (b is not None and use) else 0.0

    def rows(self) -> list[dict[str, object]]:
        return [{"clock": b.clock, "offset_s": b.offset_s, "lo_s": b.lo_s, "hi_s": b.hi_s,
                 "width_s": b.width_s, "pairs": b.pairs, "how": b.how, "reference": self.reference,
                 "applied": self.enabled and self.consistent and b.applied, "needs": b.needs}
                for b in self.clocks.values()]


def _first(tr: Trace, kind: str, pred: Callable[[Event], bool] | None = None) -> Event | None:
    """The first event of a kind (kinds used this way are logged by one service per boot)."""
    for e in tr.events:
        if e.kind == kind and (pred is None or pred(e)):
            return e
    return None


def _dispatches(tr: Trace) -> list[tuple[Event, Event]]:
    """(conductor's "Selected host: H", the compute H's instance.create.start) for every attempt:
    matched by the host the lines name, in the order each clock gives its own lines."""
    sel: dict[str, list[Event]] = defaultdict(list)
    starts: dict[str, list[Event]] = defaultdict(list)
    for e in tr.events:
        if e.kind == "conductor.selected" and e.host:
            sel[e.host].append(e)
        elif e.kind == "compute.create.start" and e.host:
            starts[e.host].append(e)
    # the first attempt is the super-conductor's (the one that called the scheduler), retries the
    # cell conductor's: each conductor's and each compute's lines in their own order
    sup = next((e.stream for e in tr.events if e.kind == "conductor.scheduled"), None)
    out = []
    for host, ss in sel.items():
        cs = sorted(starts.get(host, []), key=lambda e: (e.stream, e.t))
        out += list(zip(sorted(ss, key=lambda e: (e.stream != sup, e.stream, e.t)), cs, strict=False))
    if not out and tr.attempts == 1:   # hosts not named (older notifications): one attempt only
        s, c = _first(tr, "conductor.selected"), _first(tr, "compute.create.start")
        if s is not None and c is not None:
            out.append((s, c))
    return out


def pairs_of(tr: Trace) -> list[Pair]:
    """The happens-before pairs one boot's events give."""
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
    add(recv, cond, "api → conductor (cast)", None)
    if out and cond_call is not None:   # the conductor's call time, before its "Took …" line
        out[-1] = replace(out[-1], b_t=cond_call)
    add(recv, s_in, "api → scheduler (via conductor)")
    if cond is not None and cond_call is not None and s_in is not None and cond.stream != s_in.stream:
        out.append(Pair(cond.stream, cond_call, s_in.stream, s_in.t, "conductor → scheduler (call)"))
    add(s_out, cond, "scheduler → conductor (reply)")
    add(s_in, cand, "scheduler → placement (GET /allocation_candidates)")
    add(cand, claiming or s_sel, "placement → scheduler (candidates returned)")
    add(claiming, claim, "scheduler → placement (PUT /allocations)")
    add(claim, s_sel or s_out, "placement → scheduler (claim returned)")
    dispatched = _dispatches(tr)
    for s, c in dispatched:
        add(s, c, "conductor → compute (cast)")
    if claim is not None and dispatched and tr.attempts == 1:
        c_start = dispatched[0][1]
        claimed = next((e for e in tr.events if e.kind == "compute.claimed" and e.stream == c_start.stream),
                       None)
        # the compute's placement calls (another address than the scheduler's claim), on one
        # placement clock: the first (GET /allocations/<uuid>) is made inside the claim, every
        # later one after it
        others = [e for e in tr.events if e.kind.startswith("placement.") and e.peer != claim.peer]
        first = next((e for e in others if e.kind == "placement.get_allocations"), None)
        if first is not None and claimed is not None:
            calls = sorted((e for e in others if e.stream == first.stream and e.peer == first.peer),
                           key=lambda e: e.t)
            add(c_start, first, "compute → placement (GET /allocations)")
            add(first, claimed, "placement → compute (allocations returned)")
            later = [e for e in calls if e.t > first.t]
            if later:
                add(claimed, later[0], "compute → placement (after the claim)")
    return out


def estimate(pairs: Iterable[Pair], clock_of: Callable[[str], str], reference: str | None = None) -> Skew:
    """Offsets per clock, relative to ``reference`` when it is bounded on both sides by the
    largest group of clocks (else the clock of that group in most pairs)."""
    w: dict[tuple[str, str], float] = {}
    what: dict[tuple[str, str], str] = {}
    count: dict[str, int] = {}
    for p in pairs:
        a, b = clock_of(p.a_stream), clock_of(p.b_stream)
        if a == b:
            continue
        d = p.b_t - p.a_t + RESOLUTION_S
        if d < w.get((a, b), INF):
            w[(a, b)], what[(a, b)] = d, p.what
        count[a] = count.get(a, 0) + 1
        count[b] = count.get(b, 0) + 1
    clocks = sorted(count)
    if not clocks:
        return Skew(reference=reference or "-", note="no cross-clock pair: nothing to correct")
    ix = {c: i for i, c in enumerate(clocks)}
    dist = _floyd(len(clocks), {(ix[a], ix[b]): v for (a, b), v in w.items()})
    cyc = [c for c in clocks if dist[ix[c], ix[c]] < -1e-9]
    if cyc:
        ref = reference if reference in count else max(clocks, key=lambda c: count[c])
        sk = Skew(reference=ref, consistent=False,
                  note=f"inconsistent pairs (a negative cycle through {', '.join(cyc)}): clocks drift "
                       "during the logs or files are assigned to the wrong clock; not corrected")
        for c in clocks:
            sk.clocks[c] = ClockBound(c, 0.0, math.nan, math.nan, count[c], "inconsistent", False)
        return sk
    reach = dist < INF
    group = (reach & reach.T).sum(axis=1)
    big = int(group.max())
    ref = (reference if reference in count and group[ix[reference]] == big
           else max((c for c in clocks if group[ix[c]] == big), key=lambda c: (count[c], c)))
    note = ""
    if reference in count and ref != reference:
        note = (f"reference {ref}: {reference} is bounded on one side only (no pair comes back to it), "
                f"{ref} is in the largest group of clocks bounded on both sides")
    r = ix[ref]
    bounds = {c: (-float(dist[ix[c], r]), float(dist[r, ix[c]])) for c in clocks}
    sk = Skew(reference=ref, note=note)
    sk.clocks[ref] = ClockBound(ref, 0.0, 0.0, 0.0, count[ref], "reference")
    two = sorted((c for c in clocks if c != ref and all(map(math.isfinite, bounds[c]))),
                 key=lambda c: bounds[c][1] - bounds[c][0])
    one = sorted((c for c in clocks if c != ref and c not in two), key=lambda c: (-count[c], c))
    for c in [*two, *one]:
        i = ix[c]
        lo, hi = -float(dist[i, r]), float(dist[r, i])    # narrowed by the clocks already fixed
        if c in two:
            v = (lo + hi) / 2.0
            cb = ClockBound(c, v, *bounds[c], count[c], "midpoint")
        else:
            v = min(max(0.0, lo), hi)
            olo, ohi = bounds[c]
            h = ("unbounded" if not (math.isfinite(olo) or math.isfinite(ohi)) else
                 "unbounded below" if not math.isfinite(olo) else "unbounded above")
            if v != 0.0:
                h += " (least shift for causal order)"
            cb = ClockBound(c, v, olo, ohi, count[c], h, v != 0.0, _needs(c, ref, olo, ohi, what))
        sk.clocks[c] = cb
        _pin(dist, r, i, v)
    sk.clocks = {c: sk.clocks[c] for c in clocks}
    return sk


def _needs(c: str, ref: str, lo: float, hi: float, what: Mapping[tuple[str, str], str]) -> str:
    """Which pair would bound a clock bounded on one side only."""
    into = sorted({v for (a, b), v in what.items() if b == c})
    out = sorted({v for (a, b), v in what.items() if a == c})
    parts = []
    if not math.isfinite(lo):
        parts.append(f"a pair from {c} back to {ref}'s side (a reply or a call {c} makes that "
                     f"{ref}'s side logs; {c} has only {'; '.join(into) or 'none'})")
    if not math.isfinite(hi):
        parts.append(f"a pair from {ref}'s side to {c} (a call {c} receives; {c} has only "
                     f"{'; '.join(out) or 'none'})")
    return " and ".join(parts) + f", or group {c} with a bounded clock (--clock)"


def _floyd(n: int, w: Mapping[tuple[int, int], float]) -> NDArray[np.float64]:
    d = np.full((n, n), INF)
    np.fill_diagonal(d, 0.0)
    for (a, b), v in w.items():
        d[a, b] = min(d[a, b], v)
    for k in range(n):
        np.minimum(d, d[:, k, None] + d[None, k, :], out=d)
    return d


def _pin(d: NDArray[np.float64], r: int, c: int, v: float) -> None:
    """Add o_c − o_r = v (edges r→c of v and c→r of −v) to the shortest paths, in place."""
    np.minimum(d, d[:, r, None] + v + d[None, c, :], out=d)
    np.minimum(d, d[:, c, None] - v + d[None, r, :], out=d)


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
