"""Logical RPC agents of a point, packed into agent processes, and one measured run of them.

    agents = layout(tc, clients, servers, targets, method, sites, clients_in, servers_in)
    procs = pack(agents, per_process=250, rate=200.0)      # ProcPlan per OS process
    with AgentRun(lab, workdir, url_of, conf_text, ...) as ar:
        ar.start(procs)                                    # servers, then clients, all ready
        start_at = ar.go()                                 # common start time (epoch s)
        ar.wait_clients(limit_s)                           # clients finished sending
        ar.drain()                                         # deliveries stopped coming
    # leaving the block stops every agent process by pid

The processes run ``juice_messaging.agent`` (plugins/juice-messaging) with the messaging venv's
interpreter inside their site, and talk to Juice through files only (plan, ready, go, stop, out:
see that module). Topics are ``juice-<case>`` (tc1, tc3, tc5) or ``juice-<case>-<k>`` (tc2, tc4).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from juice.contract import Progress
from juice.errors import JuiceError, ServiceError
from juice.lab.place import Lab
from juice.paths import cache_dir
from juice.services.process import Server, spawn, stop_all
from juice.util import atomic


def venv_python() -> Path:
    return Path(os.environ.get("JUICE_MESSAGING_VENV", str(cache_dir() / "messaging"))) / "bin" / "python"


@dataclass(frozen=True)
class Agent:
    id: str
    role: str          # "server" | "client"
    site: int
    topic: str
    method: str = ""   # clients: call | cast | fanout


def _rr(sites: Sequence[int], i: int) -> int:
    return sites[i % len(sites)]


def layout(tc: str, clients: int, servers: int, targets: int, method: str, sites: int,
           clients_in: Sequence[int] | None = None, servers_in: Sequence[int] | None = None,
           name: str | None = None) -> list[Agent]:
    """The logical agents of a point (see ``spec``'s test cases), placed round robin. Topics
    are ``juice-<name>[-<k>]`` (``name``: the case's label, default the test case): cases
    never share queues."""
    base = f"juice-{name or tc}"
    all_sites = list(range(1, sites + 1))
    cs, ss = list(clients_in or all_sites), list(servers_in or all_sites)
    out: list[Agent] = []
    if tc in ("tc1", "tc5", "tc3"):
        topic = base
        m = "fanout" if tc == "tc3" else method
        out += [Agent(f"s{i}", "server", _rr(ss, i), topic) for i in range(servers)]
        out += [Agent(f"c{i}", "client", _rr(cs, i), topic, m) for i in range(clients)]
    elif tc == "tc2":
        for k in range(targets):
            topic = f"{base}-{k}"
            out.append(Agent(f"s{k}", "server", _rr(ss, k), topic))
            out.append(Agent(f"c{k}", "client", _rr(cs, k), topic, method))
    elif tc == "tc4":
        for k in range(targets):
            topic = f"{base}-{k}"
            out += [Agent(f"s{k}.{i}", "server", _rr(ss, k * servers + i), topic) for i in range(servers)]
            out.append(Agent(f"c{k}", "client", _rr(cs, k), topic, "fanout"))
    else:
        raise ValueError(f"unknown test case {tc!r}")
    return out


def expected_per_message(agents: Sequence[Agent]) -> dict[str, int]:
    """Deliveries a message of each topic should get: 1 (call/cast), every server (fanout)."""
    servers: dict[str, int] = {}
    fanout: set[str] = set()
    for a in agents:
        if a.role == "server":
            servers[a.topic] = servers.get(a.topic, 0) + 1
        elif a.method == "fanout":
            fanout.add(a.topic)
    return {t: (n if t in fanout else 1) for t, n in servers.items()}


@dataclass
class ProcPlan:
    name: str
    site: int
    role: str
    agents: list[Agent]
    rate: float = 0.0


def pack(agents: Sequence[Agent], per_process: int, rate: float) -> list[ProcPlan]:
    """Agents grouped by (site, role), chunked ``per_process`` at a time; each client process
    gets the share of ``rate`` its clients hold."""
    groups: dict[tuple[int, str], list[Agent]] = {}
    for a in agents:
        groups.setdefault((a.site, a.role), []).append(a)
    n_clients = sum(1 for a in agents if a.role == "client")
    out: list[ProcPlan] = []
    for (site, role), members in sorted(groups.items()):
        for j in range(0, len(members), per_process):
            chunk = members[j:j + per_process]
            r = rate * len(chunk) / n_clients if role == "client" and n_clients else 0.0
            out.append(ProcPlan(f"{role[0]}{site}-{j // per_process}", site, role, chunk, r))
    return out


@dataclass
class AgentRun:
    """Agent processes of one run in ``workdir`` (see the module doc)."""

    lab: Lab
    workdir: Path
    url_of: Callable[[int], str]        # the transport URL agents in a site use
    conf_text: str                       # oslo.config file for every agent
    progress: Progress
    duration_s: float
    timeout_s: float
    length: int
    pool: int
    backlog: int = 2000
    arrivals: str = "poisson"
    seed: int = 1
    work_s: float = 0.0
    procs: list[ProcPlan] = field(default_factory=list)
    servers: dict[str, Server] = field(default_factory=dict)
    ready: dict[str, dict[str, Any]] = field(default_factory=dict)
    start_at: float = 0.0
    tag: str = field(default_factory=lambda: secrets.token_hex(3))

    def __enter__(self) -> AgentRun:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # use_queue_manager counts processes with file locks: oslo.concurrency needs lock_path
        locks = self.workdir / "locks"
        locks.mkdir(exist_ok=True)
        (self.workdir / "agent.conf").write_text(
            self.conf_text + f"\n[oslo_concurrency]\nlock_path = {locks}\n")
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        (self.workdir / "stop").touch()
        stop_all(self.servers.values(), grace_s=20)

    # ---- files ---------------------------------------------------------------------------------
    def path(self, name: str, what: str) -> Path:
        return self.workdir / f"{name}.{what}"

    def _plan(self, p: ProcPlan) -> dict[str, Any]:
        return {
            "url": self.url_of(p.site),
            "conf_files": [str(self.workdir / "agent.conf"), str(self._identity(p))],
            "site": p.site,
            "servers": [{"id": a.id, "topic": a.topic} for a in p.agents if a.role == "server"],
            "clients": [{"id": a.id, "topic": a.topic, "m": a.method}
                        for a in p.agents if a.role == "client"],
            "rate": p.rate, "duration_s": self.duration_s, "timeout_s": self.timeout_s,
            "length": self.length, "pool": self.pool, "backlog": self.backlog,
            "arrivals": self.arrivals, "seed": self.seed * 1000 + self.procs.index(p), "run": self.tag,
            "out": str(self.path(p.name, "jsonl")), "ready": str(self.path(p.name, "ready")),
            "go": str(self.workdir / "go"), "stop": str(self.workdir / "stop"),
            "max_wait_s": 900, "max_life_s": 7200, "work_s": self.work_s,
        }

    def _identity(self, p: ProcPlan) -> Path:
        """The process's own oslo.config file: a distinct hostname/processname per agent process.
        All sites share this host's hostname, and oslo's queue manager (use_queue_manager) names
        reply and fanout queues after hostname:processname with a counter that processes of
        other process groups reset: without this, agent processes would share reply queues and
        steal each other's replies (cf. oslo.messaging bug 2110957)."""
        path = self.path(p.name, "conf")
        path.write_text(f"[oslo_messaging_rabbit]\nhostname = juice-site{p.site}\n"
                        f"processname = juice-agent-{self.tag}-{p.name}\n")
        return path

    # ---- lifecycle -----------------------------------------------------------------------------
    def _spawn(self, py: Path, p: ProcPlan) -> None:
        plan = self.path(p.name, "plan.json")
        atomic.write_json(plan, self._plan(p))
        argv = [str(py), "-m", "juice_messaging.agent", str(plan)]
        self.servers[p.name] = spawn(self.lab.place(p.site), argv, log=self.path(p.name, "log"),
                                     what=f"agent process {p.name}")

    def _ready(self, p: ProcPlan, limit_s: float) -> None:
        ready = self.path(p.name, "ready")
        self.servers[p.name].wait_ready(ready.exists, max(1.0, limit_s))
        self.ready[p.name] = json.loads(ready.read_text())

    def start(self, procs: Sequence[ProcPlan]) -> None:
        """Server processes first (all ready), then client processes (all ready). Bounded."""
        py = venv_python()
        if not py.exists():
            raise JuiceError(f"{py} is missing: run scripts/setup.sh (the messaging venv)")
        self.procs = list(procs)
        for role in ("server", "client"):
            batch = [p for p in self.procs if p.role == role]
            n = sum(len(p.agents) for p in batch)
            if batch:
                self.progress(f"{len(batch)} {role} process(es), {n} {role}s: starting")
            limit = 60.0 + 0.2 * n
            t0 = time.monotonic()
            for p in batch:
                self._spawn(py, p)
            for p in batch:
                self._ready(p, limit - (time.monotonic() - t0))
            if batch:
                self.progress(f"{role}s ready in {time.monotonic() - t0:.1f} s")

    def go(self, settle_s: float = 1.0) -> float:
        """Let subscriptions settle, then publish the common start time."""
        time.sleep(settle_s)
        self.start_at = time.time() + 0.5
        atomic.write_json(self.workdir / "go", {"start_at": self.start_at})
        return self.start_at

    def wait_clients(self, limit_s: float, tick: Callable[[], None] | None = None) -> None:
        """Until every client process has exited (bounded by ``limit_s``); ServiceError if one
        failed or the bound passed."""
        deadline = time.monotonic() + limit_s
        clients = [self.servers[p.name] for p in self.procs if p.role == "client"]
        last = 0.0
        while time.monotonic() < deadline:
            running = [c for c in clients if c.proc is not None and c.exit_code() is None]
            if not running:
                break
            if time.monotonic() - last >= 5:
                last = time.monotonic()
                self.progress(f"sending: {self.sent()} messages so far")
            if tick:
                tick()
            time.sleep(0.2)
        else:
            raise ServiceError(f"client processes still running after {limit_s:.0f} s "
                               f"(logs in {self.workdir})")
        bad = [f"{c.what}: exit {code}" for c in clients if (code := c.exit_code()) not in (0, None)]
        if bad:
            raise ServiceError("; ".join(bad) + f" (logs in {self.workdir})")

    def sent(self) -> int:
        n = 0
        for p in self.procs:
            if p.role == "client":
                f = self.path(p.name, "jsonl")
                if f.exists():
                    with f.open("rb") as fh:
                        n += sum(1 for _ in fh)
        return n

    def drain(self, quiet_s: float = 2.0, limit_s: float = 30.0) -> float:
        """Wait until the servers' record files stop growing for ``quiet_s`` (late casts and
        fanouts), at most ``limit_s``; returns the seconds waited."""
        t0 = time.monotonic()
        files = [self.path(p.name, "jsonl") for p in self.procs if p.role == "server"]

        def size() -> int:
            return sum(f.stat().st_size for f in files if f.exists())

        last, since = size(), time.monotonic()
        while time.monotonic() - t0 < limit_s:
            time.sleep(0.2)
            now = size()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
        (self.workdir / "stop").touch()
        stop_all([self.servers[p.name] for p in self.procs if p.role == "server"], grace_s=60)
        return time.monotonic() - t0

    def record_files(self) -> list[Path]:
        return [self.path(p.name, "jsonl") for p in self.procs]

    def logs(self) -> list[Path]:
        return [self.path(p.name, "log") for p in self.procs]
