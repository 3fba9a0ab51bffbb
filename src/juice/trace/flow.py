"""The nova boot flow as a state machine: events → one trace per boot (request id × instance).

    traces, unfit = build(events)      # events with corrected times (see skew.apply)

The flow it follows is nova's current one (nova ≥ Train; checked against nova 34):

    api POST /servers ─cast─► super-conductor schedule_and_build_instances
        ─call─► scheduler select_destinations (placement GET /allocation_candidates,
                PUT /allocations/<uuid> = the claim; alternates per instance)
        ◄─ hosts ─ conductor "Selected host …; Alternates …" ─cast─► compute build_and_run_instance
        (instance.create.start, claim, image fetch, spawn, instance.create.end = ACTIVE)
    a failed build on a compute (instance.create.error) goes back to the cell conductor
    (build_instances, "Rescheduling: True"), which claims an alternate and casts to its compute,
    until the alternates run out ("Exhausted all hosts…" / "Exceeded max scheduling attempts").

Terminal states: ``active``, ``no_valid_host``, ``retries_exhausted``, ``compute_failed``,
``api_failed``; a boot without one (logs cut short, levels too low, a flow this machine does not
know) is ``incomplete`` and kept, with what it saw. Causal order violations between milestones
(e.g. a compute event before the scheduler's decision, beyond the logs' 1 ms resolution) are
listed per boot as anomalies: with clocks skewed they are what the correction removes.

Milestones (first attempt unless said) and the phases between them, which add up to the boot's
time: api (POST received → conductor calls the scheduler), rpc_scheduler (→ scheduler starts),
scheduler (→ its decision), rpc_conductor (→ the conductor has the hosts), conductor (→ it
selects the host and casts), rpc_compute (→ compute starts the build), retry (first → last
attempt's start, rescheduled boots only), claim, image (→ the node has the image: downloaded
through glance-api, or its cached copy; only when the simulated nodes fetch images, issue 40),
spawn, vif_plugged (the spawn's wait for neutron's ``network-vif-plugged``, from the VIFs' plug to
the event: only with the real neutron, issue 40; the spawn's time before and after it stays
``spawn``), finish (→ instance.create.end). A missing milestone folds its time into the phase before it.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from juice.trace.parse import Event

TERMINALS = ("active", "no_valid_host", "retries_exhausted", "compute_failed", "api_failed")
PHASES = ("api", "rpc_scheduler", "scheduler", "rpc_conductor", "conductor", "rpc_compute", "retry",
          "claim", "image", "spawn", "vif_plugged", "finish")
BOOT_KINDS = frozenset({"api.received", "scheduler.received", "conductor.selected", "compute.create.start"})
RESOLUTION_S = 0.0015   # text logs have 1 ms timestamps


@dataclass
class Trace:
    rid: str
    uuid: str | None
    state: str = "incomplete"
    attempts: int = 0
    host: str | None = None
    hosts: list[str] = field(default_factory=list)
    alternates: int | None = None
    t_start: float | None = None
    t_end: float | None = None
    api_status: int | None = None
    fault: str | None = None
    fault_template: str | None = None
    fault_component: str | None = None
    milestones: dict[str, float] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    claim_conflicts: int = 0

    @property
    def duration_s(self) -> float | None:
        if self.t_start is None or self.t_end is None:
            return None
        return self.t_end - self.t_start


@dataclass
class Unfit:
    """What could not be placed in a boot trace (counted and shown, never dropped silently)."""

    orphan_events: int = 0           # boot-flow events of an instance whose request has no boot
    no_request_id: int = 0           # flow events without a request id
    other_requests: int = 0          # requests that are not boots (deletes, GETs, periodic tasks)
    examples: list[str] = field(default_factory=list)


FIRST = {"api.received": "received", "api.returned": "returned", "scheduler.received": "sched_in",
         "scheduler.start": "sched_start", "placement.candidates": "candidates", "scheduler.end": "sched_end",
         "scheduler.selected": "sched_selected", "placement.claim": "claim_put",
         "conductor.selected": "dispatched"}


def _group(events: Iterable[Event]) -> tuple[dict[str, list[Event]], Unfit]:
    by_rid: dict[str, list[Event]] = defaultdict(list)
    unfit = Unfit()
    for e in events:
        rid = e.rid
        if rid is None:
            if e.kind in BOOT_KINDS or e.kind.startswith("compute."):
                unfit.no_request_id += 1
            continue
        by_rid[rid].append(e)
    return by_rid, unfit


def build(events: Iterable[Event]) -> tuple[list[Trace], Unfit]:
    """One trace per boot: a request with a boot-flow event, times its instances (a request
    without an instance, e.g. a refused POST, is one trace with ``uuid`` None)."""
    by_rid, unfit = _group(events)
    traces: list[Trace] = []
    boot_uuids: set[str] = set()
    for rid, evs in by_rid.items():
        if not any(e.kind in BOOT_KINDS for e in evs):
            unfit.other_requests += 1
            continue
        found = {e.uuid for e in evs
                 if e.uuid and (not e.kind.startswith("placement.") or e.kind == "placement.claim")}
        uuids: list[str | None] = [*sorted(u for u in found if u)]
        for u in uuids or [None]:
            mine = sorted((e for e in evs if e.uuid in (None, u)), key=lambda e: e.t)
            traces.append(_machine(rid, u, mine))
            if u:
                boot_uuids.add(u)
    # boot-flow events of instances whose own request never showed up as a boot
    for rid, evs in by_rid.items():
        if any(e.kind in BOOT_KINDS for e in evs):
            continue
        stray = [e for e in evs
                 if e.kind.startswith("compute.create") and e.uuid and e.uuid not in boot_uuids]
        if stray:
            unfit.orphan_events += len(stray)
            if len(unfit.examples) < 5:
                unfit.examples.append(f"{stray[0].kind} {stray[0].uuid} ({rid}) without its request's start")
    return traces, unfit


def _fault_class(text: str) -> str | None:
    if any(p in text for p in ("Exceeded max scheduling attempts", "Exhausted all hosts",
                               "MaxRetriesExceeded")):
        return "retries_exhausted"
    if "No valid host" in text or "NoValidHost" in text:
        return "no_valid_host"
    return None


def _machine(rid: str, uuid: str | None, evs: Sequence[Event]) -> Trace:
    tr = Trace(rid=rid, uuid=uuid, events=list(evs))
    ms = tr.milestones
    starts: list[float] = []
    ends: list[Event] = []
    errors: list[Event] = []
    failed: list[Event] = []
    api_fail: Event | None = None
    resched = -1.0
    for e in evs:
        k = e.kind
        if k in FIRST and FIRST[k] not in ms and (k != "placement.claim" or (e.value or 0) < 300):
            ms[FIRST[k]] = e.t
        if k == "placement.claim" and (e.value or 0) == 409:
            tr.claim_conflicts += 1
        if k == "api.returned":
            tr.api_status = int(e.value or 0)
            if tr.api_status >= 400:
                api_fail = e
        elif k == "conductor.scheduled" and "cond_back" not in ms:
            ms["cond_back"] = e.t
            ms["cond_call"] = e.t - (e.value or 0.0)
        elif k == "conductor.selected":
            tr.hosts.append(e.host or "?")
            if tr.alternates is None:
                tr.alternates = int(e.value or 0)
        elif k == "conductor.rescheduling":
            resched = e.t
        elif k == "compute.create.start":
            starts.append(e.t)
            tr.host = e.host or tr.host
        elif k == "compute.claimed":
            ms["claimed"] = e.t
        elif k == "compute.imaged":
            ms["imaged"] = e.t
        elif k == "compute.vif_plugged":
            ms["vif_wait"], ms["plugged"] = e.t - (e.value or 0.0), e.t
        elif k == "compute.spawned":
            ms["spawned"] = e.t
        elif k in ("compute.create.end", "compute.built"):
            ends.append(e)
        elif k == "compute.create.error":
            errors.append(e)
        elif k == "conductor.build_failed":
            failed.append(e)
        elif k == "scheduler.no_hosts" and tr.fault is None:
            tr.fault, tr.fault_component = e.detail, "scheduler"
    tr.attempts = len(starts)
    if starts:
        ms["compute_in"] = starts[0]
        if len(starts) > 1:
            ms["retry_in"] = starts[-1]
    done: float | None = None
    classes = [(c, e) for e in failed if (c := _fault_class(e.detail or "")) is not None]
    if api_fail is not None:
        tr.state, done = "api_failed", api_fail.t
        tr.fault, tr.fault_component, tr.fault_template = api_fail.detail, "api", f"HTTP {tr.api_status}"
    elif classes:
        cls, e = classes[0]
        tr.state, done = cls, e.t
        tr.fault, tr.fault_component = e.detail, "conductor"
        tr.fault_template = _conductor_template(e.detail or "")
    elif ends:
        end = next((e for e in ends if e.kind == "compute.create.end"), ends[0])
        tr.state, done = "active", end.t
        tr.fault = None
    elif errors and max(starts, default=-1.0) <= errors[-1].t and resched < errors[-1].t:
        e = errors[-1]
        tr.state, done = "compute_failed", e.t
        tr.fault, tr.fault_component, tr.fault_template = e.detail, "compute", e.template
    elif errors or failed:
        e = (failed or errors)[-1]
        tr.fault, tr.fault_component = e.detail, e.component
        tr.fault_template = e.template or _conductor_template(e.detail or "")
    if done is not None:
        ms["done"] = done
    tr.t_start = ms.get("received", evs[0].t if evs else None)
    tr.t_end = ms.get("done", evs[-1].t if evs else None)
    _phases(tr)
    return tr


EXC_PREFIX = re.compile(r"^(Failed to [\w ]+: )?([\w.]+(Error|Exception|Remote|Exceeded|Host|Found)\w*: )?")


def _conductor_template(detail: str) -> str:
    """"Failed to schedule instances: nova.exception_Remote.NoValidHost_Remote: No valid host…"
    → "No valid host…" (the failing step and the exception class are the component's)."""
    from juice.trace.parse import template_of

    return template_of(EXC_PREFIX.sub("", detail, count=1))


# the milestone path: (milestone, the phase that ends there)
PATH: tuple[tuple[str, str], ...] = (
    ("received", ""), ("cond_call", "api"), ("sched_in", "rpc_scheduler"), ("sched_out", "scheduler"),
    ("cond_back", "rpc_conductor"), ("dispatched", "conductor"), ("compute_in", "rpc_compute"),
    ("retry_in", "retry"), ("claimed", "claim"), ("imaged", "image"), ("vif_wait", "spawn"),
    ("plugged", "vif_plugged"), ("spawned", "spawn"), ("done", "finish"))
OPTIONAL = ("retry_in", "imaged", "vif_wait", "plugged")  # milestones only some boots have
ORDER = ("received", "cond_call", "sched_in", "sched_out", "cond_back", "dispatched", "compute_in")


def _phases(tr: Trace) -> None:
    ms = tr.milestones
    if "sched_in" not in ms:
        for alt in ("sched_start", "candidates"):
            if alt in ms:
                ms["sched_in"] = ms[alt]
                break
    if "sched_out" not in ms:
        got = [ms[k] for k in ("sched_end", "sched_selected", "claim_put") if k in ms]
        if got:
            ms["sched_out"] = max(got)
    if "sched_end" in ms:
        ms["sched_out"] = ms["sched_end"]
    # causal order of the first attempt's milestones (beyond the logs' resolution)
    seen: list[tuple[str, float]] = [(k, ms[k]) for k in ORDER if k in ms]
    for (a, ta), (b, tb) in itertools.pairwise(seen):
        if tb < ta - RESOLUTION_S:
            tr.anomalies.append(f"{b} {ta - tb:.3f}s before {a}")
    if tr.state != "active" and tr.state != "incomplete":
        for k in ("claimed", "imaged", "vif_wait", "plugged", "spawned"):
            if k in ms and "done" in ms and ms[k] > ms["done"]:
                ms.pop(k)
    for phase, _, _, start, end in segments(ms):
        tr.phases[phase] = tr.phases.get(phase, 0.0) + (end - start)


def segments(ms: Mapping[str, float]) -> list[tuple[str, str, str, float, float]]:
    """The phases of a boot's milestones ``ms``, in order: (phase, from, to, start, end). The
    time from one present milestone to the next is charged to the phase that starts at the
    first (a missing milestone folds its time into the phase before it); never backwards."""
    # retry: rescheduled boots only; image: only where the nodes fetch images; vif: real neutron only
    path = [p for p in PATH if p[0] not in OPTIONAL or p[0] in ms]
    names = [name for name, _ in path]
    present = [name for name in names if name in ms]
    out: list[tuple[str, str, str, float, float]] = []
    if not present:
        return out
    cursor = ms[present[0]]
    for a, b in itertools.pairwise(present):
        end = max(cursor, ms[b])
        out.append((path[names.index(a) + 1][1], a, b, cursor, end))
        cursor = end
    return out
