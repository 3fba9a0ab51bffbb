"""The messaging study on the study contract: points, lab, bus deployment and one run.

A point = one-way delay (its lab) × bus (its deployment) × test case × scale (clients, servers,
targets) × rate × repetition. A run starts the point's agent processes (``agents``), sends for
``duration_s`` at the intended rate, waits for late deliveries, stops the agents and stores:

- ``messages.parquet`` (one row per message: ``metrics``), ``deliveries.parquet`` (one row per
  delivery: id, srv, site, t);
- ``summary.json`` (counts, lost/duplicated by id, percentiles, locality, load balance);
- ``processes.json`` (per agent process: site, agents, RSS at start, CPU seconds at the end);
- ``counters.json`` (the bus's own counters before, mid-run and after); ``events.jsonl`` for
  tc5's faults; the agents' logs under ``agents/``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from juice.contract import Progress, ReportInput, Run, Study
from juice.faults.runner import EVENTS, FaultRunner
from juice.lab.open import open_lab, uniform_spec
from juice.lab.place import Lab
from juice.services.base import Service
from juice.studies.messaging import agents as ag
from juice.studies.messaging import buses, metrics
from juice.studies.messaging.spec import Bus, Case, MessagingSpec
from juice.util import atomic
from juice.util.validation import validate

DRIVER_NOTE = "Juice's own NATS transport for oslo.messaging (plugins/juice-messaging), not upstream's"


@dataclass(frozen=True)
class MsgPoint:
    sites: int
    delay_ms: float
    bus_index: int
    bus: Bus
    case_index: int
    case: Case
    clients: int
    servers: int
    targets: int
    rate: float
    repetition: int
    agents_per_process: int
    pool: int
    warmup_s: float
    arrivals: str = "poisson"
    seed: int = 1

    @property
    def params(self) -> dict[str, object]:
        c = self.case
        return {"tc": c.tc, "case": c.name, "method": c.method_sent, "clients": self.clients,
                "servers": self.servers, "targets": self.targets, "rate": self.rate,
                "agents": len(self.agents()), "duration_s": c.duration_s, "length": c.length,
                "timeout_s": c.timeout_s, "work_ms": c.work_ms, "clients_in": c.clients_in,
                "servers_in": c.servers_in,
                "delay_ms": self.delay_ms, "sites": self.sites, "bus": self.bus.label,
                "bus_kind": self.bus.kind, "nodes": self.bus.nodes, "queues": self.bus.queues,
                "topology": self.bus.topology, "repetition": self.repetition,
                "agents_per_process": self.agents_per_process, "pool": self.pool,
                "warmup_s": self.warmup_s, "arrivals": self.arrivals, "seed": self.seed,
                "faults": [f.model_dump(mode="json", exclude_none=True) for f in c.faults]}

    def agents(self) -> list[ag.Agent]:
        c = self.case
        return ag.layout(c.tc, self.clients, self.servers, self.targets, c.method, self.sites,
                         c.clients_in, c.servers_in, c.name)

    @property
    def key(self) -> str:
        ident = {"messaging": 1, **self.params, "bus": self.bus.model_dump(mode="json")}
        ident.pop("agents")
        if not ident.get("work_ms"):  # added later: runs without server work keep their keys
            ident.pop("work_ms", None)
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dirname(self) -> str:
        b = self.bus.label.replace("×", "x").replace(" ", "-")
        return (f"{self.case.name}-{b}-{self.delay_ms:g}ms-c{self.clients}-s{self.servers}-t{self.targets}"
                f"-r{self.rate:g}-{self.repetition}")

    @property
    def label(self) -> str:
        return (f"{self.case.name} on {self.bus.label} at {self.delay_ms:g} ms: {len(self.agents())} agents, "
                f"{self.rate:g} msg/s, rep {self.repetition}")

    @property
    def lab_key(self) -> float:
        return self.delay_ms

    @property
    def deployment_key(self) -> tuple[float, int]:
        return (self.delay_ms, self.bus_index)


class Deployment:
    """A started bus in a lab, plus what a run needs to know about it."""

    def __init__(self, lab: Lab, bus: Bus, svc: Service, delay_ms: float, facts: dict[str, object]) -> None:
        self.lab, self.bus, self.svc, self.delay_ms, self.facts = lab, bus, svc, delay_ms, facts


class Messaging(Study[MessagingSpec, MsgPoint, Deployment]):
    name = "messaging"
    title = "Messaging: oslo.messaging RPC over RabbitMQ and NATS"
    example = "examples/messaging.yaml"

    def parse(self, data: Mapping[str, object], source: str) -> MessagingSpec:
        return validate(MessagingSpec, dict(data), source, expected="a mapping (workload: messaging, ...)",
                        unknown_key_hint="see examples/messaging.yaml and juice.studies.messaging.spec")

    def expand(self, spec: MessagingSpec) -> list[MsgPoint]:
        pts = []
        for d in spec.delay_ms:
            for bi, bus in enumerate(spec.buses):
                for ci, case in enumerate(spec.cases):
                    if (case.buses is not None and bus.label not in case.buses) or \
                            (case.delay_ms is not None and d not in case.delay_ms):
                        continue
                    for c in case.clients:
                        for s in case.servers:
                            for t in case.targets:
                                for r in case.rate:
                                    for rep in range(spec.repetitions):
                                        pts.append(MsgPoint(
                                            spec.sites, d, bi, bus, ci, case, c, s, t, r, rep,
                                            spec.agents_per_process, spec.pool, spec.warmup_s,
                                            spec.arrivals, spec.seed + rep))
        return pts

    @contextmanager
    def lab(self, spec: MessagingSpec, points: Sequence[MsgPoint], progress: Progress) -> Iterator[Lab]:
        with open_lab(spec.provider, uniform_spec("msg", spec.sites, points[0].delay_ms), progress) as lab:
            yield lab

    @contextmanager
    def deployment(self, spec: MessagingSpec, lab: Lab | None, points: Sequence[MsgPoint],
                   progress: Progress) -> Iterator[Deployment]:
        assert lab is not None  # lab() always makes one
        bus = points[0].bus
        topics = sorted({a.topic for p in points for a in p.agents() if a.role == "server"})
        # the agents' venv where they will run, before any bus starts (one line if missing)
        oslo = ag.check_venv(lab, sorted({a.site for p in points for a in p.agents()}))
        svc = buses.build(lab, bus, progress, topics)
        t0 = time.monotonic()
        try:
            progress(f"bus {bus.label}: starting")
            svc.up(300.0)
            facts = {"bus_up_s": round(time.monotonic() - t0, 2), "oslo_messaging": oslo,
                     **getattr(svc, "facts", dict)()}
            if bus.kind == "nats":
                facts["transport"] = DRIVER_NOTE
            progress(f"bus {bus.label}: up in {facts['bus_up_s']:.1f} s")
            yield Deployment(lab, bus, svc, points[0].delay_ms, facts)
        finally:
            svc.stop()

    def run_point(self, run: Run[MessagingSpec, MsgPoint], dep: Deployment) -> None:
        measure(run, dep)

    def dry_run(self, spec: MessagingSpec, points: Sequence[MsgPoint],
                progress: Progress) -> list[str] | None:
        """On hosts: the provider, what runs on each host (bus nodes, agents at most), the WAN."""
        if spec.provider.kind == "local":
            return None
        from juice.lab.open import plan

        lines = [f"{len(points)} runs on hosts (provider kind {spec.provider.kind}); nothing is reserved "
                 "or contacted by this dry run"]
        for d in dict.fromkeys(p.delay_ms for p in points):
            lines += ["", f"== {spec.sites} sites, {d:g} ms one-way =="]
            lines += plan(spec.provider, uniform_spec("plan", spec.sites, d), roles(spec, points))
        return lines

    def plan_columns(self, point: MsgPoint) -> dict[str, object]:
        return {"delay": f"{point.delay_ms:g} ms", "bus": point.bus.label, "case": point.case.name,
                "method": point.case.method_sent, "agents": len(point.agents()), "rate": f"{point.rate:g}/s",
                "duration": f"{point.case.duration_s:g} s", "rep": point.repetition}

    def estimate_s(self, point: MsgPoint) -> float:
        n = len(point.agents())
        return point.case.duration_s + 8.0 + 0.02 * n + 3.0 * max(1, n // point.agents_per_process)

    def overhead_s(self, points: Sequence[MsgPoint]) -> float:
        labs = len({p.lab_key for p in points})
        deps = {p.deployment_key: p.bus for p in points}
        per = {"rabbitmq": 15.0, "rabbitmq-federation": 25.0, "nats": 5.0}
        return 3.0 * labs + sum(per[b.kind] + (15.0 * (b.nodes - 1) if b.kind == "rabbitmq" else 0)
                                for b in deps.values())

    def summary_lines(self, study_dir: Path) -> list[str]:
        from juice.studies.messaging import report

        return report.summary_lines([study_dir])

    profile_level = "bus"  # the resource profile's load levels

    def report_sections(self, inputs: ReportInput) -> list[str]:
        from juice.studies.messaging import report

        return report.sections(inputs.paths)

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Mapping[str, object],
                filter_q: float | None) -> pd.DataFrame | None:
        from juice.studies.messaging import report

        return report.analyze(list(paths), by)


def measure(run: Run[MessagingSpec, MsgPoint], dep: Deployment) -> None:
    p, rd, progress = run.point, run.rd, run.progress
    agents = p.agents()
    procs = ag.pack(agents, p.agents_per_process, p.rate)
    expected = ag.expected_per_message(agents)
    # lab: where the sites were (the hosts, their WAN backend and interfaces, or "local")
    run.manifest(params=p.params, bus=p.bus.model_dump(mode="json"), facts=dep.facts,
                 lab=dep.lab.facts(), processes=len(procs), spec=run.spec_data)
    work = rd.file("agents")
    counters: dict[str, object] = {"before": buses.counters(dep.svc)}
    c = p.case
    faults = FaultRunner(c.faults, buses.MessagingFaults(dep.lab, dep.svc, p.delay_ms), progress) \
        if c.faults else None
    with ag.AgentRun(dep.lab, work, lambda s: buses.url_for(dep.svc, s), buses.conf_text(p.bus, c.timeout_s),
                     progress, duration_s=c.duration_s + p.warmup_s, timeout_s=c.timeout_s,
                     length=c.length, pool=p.pool, arrivals=p.arrivals, seed=p.seed,
                     work_s=c.work_ms / 1000) as ar:
        ar.start(procs)
        ready = dict(ar.ready)
        if faults is not None:  # where the queues are when the faults come (tc5)
            counters["start"] = buses.counters(dep.svc)
        mid: list[threading.Thread] = []
        start_at = ar.go()
        warm_end = start_at + p.warmup_s

        def during() -> None:
            counters["during"] = buses.counters(dep.svc)

        def tick() -> None:  # the bus's counters mid-run, asked aside: a slow bus never holds the
            if not mid and time.time() >= warm_end + c.duration_s / 2:  # send loop's watchdog
                mid.append(threading.Thread(target=during, name="bus-counters", daemon=True))
                mid[0].start()

        with faults if faults is not None else nullcontext():
            if faults is not None:
                faults.observe(0, {"window_started_ms": int(warm_end * 1000)})
            ar.wait_clients(c.duration_s + p.warmup_s + c.timeout_s + 120, tick)
            drained = ar.drain(quiet_s=2.0, limit_s=max(10.0, c.timeout_s))
        if mid:
            mid[0].join(60.0)
            if mid[0].is_alive():
                counters["during"] = {"error": "no answer within 60 s after the run"}
        counters["after"] = buses.counters(dep.svc)
        try:  # the bus's logs so far (its start, and this run)
            dep.svc.collect_logs(rd.file("bus-logs"))
        except OSError as e:
            progress(f"bus logs not collected: {e}")
        sends, recvs, ends = metrics.read_records(ar.collect())
    events = [e.to_dict() for e in faults.events] if faults is not None else []
    if events:
        atomic.write_text(rd.file(EVENTS), "".join(json.dumps(e) + "\n" for e in events))
    # sends and deliveries on Juice's clock: each host's offset at the run's start (0 locally)
    msgs = metrics.messages(sends, recvs, expected, warm_end, run.clocks)
    server_sites = {a.id: a.site for a in agents if a.role == "server"}
    summary = metrics.summarize(msgs, recvs, c.duration_s, server_sites)
    summary["clocks"] = run.clocks.to_dict() if run.clocks is not None else None
    procs_info = [{"name": q.name, "site": q.site, "role": q.role, "agents": len(q.agents),
                   "rate": q.rate, **ready.get(q.name, {})} for q in procs]
    by_proc = {e.get("proc"): e for e in ends}  # by process name: pids of two hosts may be equal
    for info in procs_info:
        end = by_proc.get(info["name"], {})
        info.update({k: end.get(k) for k in ("cpu_s", "cpu_ready_s", "cpu_go_s", "rss_kib_end", "sent",
                                             "skipped")})
        # what the run itself cost: clients from go, servers from ready (imports left out)
        base = info.get("cpu_go_s") if info["role"] == "client" else info.get("cpu_ready_s")
        info["run_cpu_s"] = round(info["cpu_s"] - base, 3) if info.get("cpu_s") is not None \
            and base is not None else None
    client_cpu = sum(i.get("run_cpu_s") or 0 for i in procs_info if i["role"] == "client")
    server_cpu = sum(i.get("run_cpu_s") or 0 for i in procs_info if i["role"] == "server")
    summary["agent_cpu_s"] = {"clients": round(client_cpu, 3), "servers": round(server_cpu, 3),
                              "note": "from the start of sending (clients) / ready (servers) to exit"}
    summary["client_cpu_ms_per_message"] = (round(1000 * client_cpu / max(1, len(sends)), 4)
                                            if len(sends) else None)
    rss = [i["rss_kib"] for i in procs_info if i.get("rss_kib")]
    summary["agent_rss_mib_per_agent"] = round(sum(rss) / 1024 / max(1, len(agents)), 3) if rss else None
    summary["drain_s"] = round(drained, 2)
    if events:
        summary["killed_nodes_held"] = killed_queues(dep.lab, events, counters.get("start"),
                                                     {a.topic for a in agents})
    msgs.to_parquet(rd.file("messages.parquet"), index=False)
    recvs.to_parquet(rd.file("deliveries.parquet"), index=False)
    rd.write_json("summary.json", summary)
    rd.write_json("processes.json", procs_info)
    rd.write_json("counters.json", counters)
    for f in ar.record_files():  # now in the Parquet tables; the logs and plans stay
        f.unlink(missing_ok=True)
    _say(progress, summary)


def roles(spec: MessagingSpec, points: Sequence[MsgPoint]) -> dict[int, list[str]]:
    """What runs in each site: every bus's nodes there, and the most agents any run puts there."""
    out: dict[int, list[str]] = {k: [] for k in range(1, spec.sites + 1)}
    for bus in spec.buses:
        sites = buses.node_sites(bus, spec.sites) if bus.kind == "rabbitmq" else list(out)
        for k in sorted(set(sites)):
            out[k].append(f"{bus.label} node")
    most: dict[tuple[int, str], int] = {}
    for p in points:
        count: dict[tuple[int, str], int] = {}
        for a in p.agents():
            count[(a.site, a.role)] = count.get((a.site, a.role), 0) + 1
        for key, n in count.items():
            most[key] = max(most.get(key, 0), n)
    for (site, role), n in sorted(most.items()):
        out[site].append(f"up to {n} {role} agents")
    return out


def killed_queues(lab: Lab, events: list[dict[str, Any]], start: object,
                  topics: set[str]) -> list[dict[str, object]]:
    """Per kill event: this run's shared queues that the killed site's node held when the run
    started (RabbitMQ counters' ``shared_queues``): a kill of such a node can lose messages."""
    out = []
    for e in events:
        if e.get("action") != "kill" or not e.get("site") or not isinstance(start, dict):
            continue
        ip = lab.site_ip(int(e["site"]))
        held = sorted(q for name, c in start.items() if str(name).endswith("@" + ip) and isinstance(c, dict)
                      for q in c.get("shared_queues", []) if q in topics)
        out.append({"fault": e.get("index"), "site": e["site"], "held_queues": held})
    return out


def _say(progress: Progress, s: Mapping[str, object]) -> None:
    if s.get("rtt_p50_ms") is not None:
        lat = f"call p50 {s['rtt_p50_ms']:.2f} ms p99 {s['rtt_p99_ms']:.2f} ms"
    elif s.get("oneway_p50_ms") is not None:
        lat = f"one-way p50 {s['oneway_p50_ms']:.2f} ms" + (
            f" ± {s['oneway_bound_ms']:.2f}" if s.get("oneway_bound_ms") else "")
    elif s.get("oneway_withheld"):
        lat = f"one-way {s['oneway_withheld']}"
    else:
        lat = "no delivery"
    loc = f", {s['locality_pct']:.1f} % local" if s.get("locality_pct") is not None else ""
    progress(f"sent {s['sent']} ({s['send_rate']}/s), delivered {s['delivered']}/{s['expected_deliveries']}, "
             f"lost {s['lost']}, dup {s['duplicates']}, errors {s['errors']}, skipped {s['skipped']}; "
             f"{lat}{loc}")
