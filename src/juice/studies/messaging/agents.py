"""Logical RPC agents of a point, packed into agent processes, and one measured run of them.

    agents = layout(tc, clients, servers, targets, method, sites, clients_in, servers_in)
    procs = pack(agents, per_process=250, rate=200.0)      # ProcPlan per OS process
    version = check_venv(lab, sites)                       # the messaging venv at every place
    with AgentRun(lab, workdir, url_of, conf_text, ...) as ar:
        ar.start(procs)                                    # servers, then clients, all ready
        start_at = ar.go()                                 # common start time (epoch s)
        ar.wait_clients(limit_s)                           # clients finished sending
        ar.drain()                                         # deliveries stopped coming
        files = ar.collect()                               # their records, here
    # leaving the block stops every agent process by pid, brings their logs and plans here
    # and removes their files at the places

The processes run ``juice_messaging.agent`` (plugins/juice-messaging) with the messaging venv's
interpreter AT their site's place (a namespace here or an SSH host: the venv is at the same path
there), and talk to Juice through files only (plan, ready, go, stop, out: see that module),
written and read through the place, under ``<place root>/s<site>/agents/<run tag>/``. Topics are
``juice-<case>`` (tc1, tc3, tc5) or ``juice-<case>-<k>`` (tc2, tc4).
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from juice import onhost
from juice.contract import Progress
from juice.errors import JuiceError, ServiceError, UserError
from juice.lab.place import Lab, Place
from juice.paths import cache_dir
from juice.services.process import Server, spawn, stop_all
from juice.util import atomic
from juice.util.watchdog import Watchdog, stall_bound


def venv_python() -> Path:
    return Path(os.environ.get("JUICE_MESSAGING_VENV", str(cache_dir() / "messaging"))) / "bin" / "python"


def agent_env() -> dict[str, str]:
    """The agents' environment, the same at every place: a minimal one (the place's), plus
    this process's PYTHONPATH when set (as for load drivers: a checkout's plugin)."""
    pp = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": pp} if pp else {}


# What the agents need at a place: the venv's interpreter, Juice's agent module, oslo.messaging
# (its version is the answer). Imports nothing heavy: a fraction of a second.
VENV_PROBE = onhost.source("dists")  # juice.onhost.dists: require MODULE DIST


def check_venv(lab: Lab, sites: Sequence[int]) -> str:
    """The oslo.messaging version of the messaging venv, checked at the place of each of
    ``sites`` (where agents will run); a one-line UserError naming the place and the fix when
    it is missing or broken there."""
    py = venv_python()
    version = "unknown"
    for site in sites:
        place = lab.place(site)
        r = place.run([str(py), "-c", VENV_PROBE, "require", "juice_messaging.agent", "oslo.messaging"],
                      timeout=60, env=agent_env())
        if not r.ok:
            why = (r.err or r.out).strip().splitlines()
            fix = "scripts/setup.sh" if place.shared_disk else "`juice hosts prepare SPEC` (SPEC: this spec)"
            raise UserError(f"{place.label}: the messaging venv {py} is missing or broken "
                            f"({why[-1] if why else f'exit {r.rc}'}): run {fix}")
        version = r.out.strip() or version
    return version


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
    """Agent processes of one run (see the module doc). Their files live AT their site's place
    (``home``: the lab's directory there); ``workdir`` (on this machine) gets their logs, plans
    and records back (``collect``, and on leaving the block)."""

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
    places: dict[int, Place] = field(default_factory=dict)   # the sites prepared so far
    poll_s: float = 5.0  # how often wait_clients counts the records (and says so)

    def __enter__(self) -> AgentRun:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._everywhere("stop", "")
        finally:
            stop_all(self.servers.values(), grace_s=20)
            self._bring_back()

    # ---- files ---------------------------------------------------------------------------------
    def home(self, site: int) -> Path:
        """This run's agent directory at ``site``'s place."""
        return self.lab.place(site).root / f"s{site}" / "agents" / self.tag

    def at(self, p: ProcPlan, what: str) -> Path:
        """A file of process ``p`` at its place."""
        return self.home(p.site) / f"{p.name}.{what}"

    def path(self, name: str, what: str) -> Path:
        """A file of process ``name`` here (once brought back)."""
        return self.workdir / f"{name}.{what}"

    def _prepare(self, site: int) -> None:
        """The site's agent directory: the common oslo.config file, oslo.concurrency's locks
        (use_queue_manager counts processes with file locks: it needs lock_path)."""
        place = self.lab.place(site)
        home = self.home(site)
        place.mkdir(home / "locks")
        place.write(home / "agent.conf",
                    self.conf_text + f"\n[oslo_concurrency]\nlock_path = {home / 'locks'}\n")
        self.places[site] = place

    def _everywhere(self, name: str, text: str) -> None:
        """Write ``name`` in every prepared site's agent directory (go, stop)."""
        for site, place in self.places.items():
            place.write(self.home(site) / name, text)

    def _plan(self, p: ProcPlan) -> dict[str, Any]:
        home = self.home(p.site)
        return {
            "url": self.url_of(p.site),
            "conf_files": [str(home / "agent.conf"), str(self.at(p, "conf"))],
            "site": p.site,
            "servers": [{"id": a.id, "topic": a.topic} for a in p.agents if a.role == "server"],
            "clients": [{"id": a.id, "topic": a.topic, "m": a.method}
                        for a in p.agents if a.role == "client"],
            "rate": p.rate, "duration_s": self.duration_s, "timeout_s": self.timeout_s,
            "length": self.length, "pool": self.pool, "backlog": self.backlog,
            "arrivals": self.arrivals, "seed": self.seed * 1000 + self.procs.index(p), "run": self.tag,
            "out": str(self.at(p, "jsonl")), "ready": str(self.at(p, "ready")),
            "go": str(home / "go"), "stop": str(home / "stop"),
            "max_wait_s": 900, "max_life_s": 7200, "work_s": self.work_s,
        }

    def _identity(self, p: ProcPlan) -> str:
        """The process's own oslo.config file: a distinct hostname/processname per agent process.
        All sites of a local lab share this host's hostname, and oslo's queue manager
        (use_queue_manager) names reply and fanout queues after hostname:processname with a
        counter that processes of other process groups reset: without this, agent processes
        would share reply queues and steal each other's replies (cf. oslo.messaging bug 2110957)."""
        return (f"[oslo_messaging_rabbit]\nhostname = juice-site{p.site}\n"
                f"processname = juice-agent-{self.tag}-{p.name}\n")

    # ---- lifecycle -----------------------------------------------------------------------------
    def _spawn(self, py: Path, p: ProcPlan) -> None:
        place = self.lab.place(p.site)
        place.write(self.at(p, "conf"), self._identity(p))
        place.write(self.at(p, "plan.json"), json.dumps(self._plan(p), indent=1))
        argv = [str(py), "-m", "juice_messaging.agent", str(self.at(p, "plan.json"))]
        self.servers[p.name] = spawn(place, argv, log=self.at(p, "log"), what=f"agent process {p.name}",
                                     env=agent_env())

    def _ready(self, p: ProcPlan, limit_s: float) -> None:
        place, ready = self.lab.place(p.site), self.at(p, "ready")
        self.servers[p.name].wait_ready(lambda: place.read(ready) is not None, max(1.0, limit_s))
        self.ready[p.name] = json.loads(place.read(ready) or b"{}")

    def start(self, procs: Sequence[ProcPlan]) -> None:
        """Server processes first (all ready), then client processes (all ready). Bounded."""
        py = venv_python()
        self.procs = list(procs)
        for site in sorted({p.site for p in self.procs}):
            self._prepare(site)
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
        """Let subscriptions settle, then publish the common start time (at every site: one
        write each, well within the half second before it)."""
        time.sleep(settle_s)
        self.start_at = time.time() + 0.5
        self._everywhere("go", json.dumps({"start_at": self.start_at}))
        return self.start_at

    def wait_clients(self, limit_s: float, tick: Callable[[], None] | None = None,
                     stall_s: float | None = None) -> None:
        """Until every client process has exited (bounded by ``limit_s``); ServiceError if one
        failed or the bound passed, ``watchdog.Stalled`` (a ServiceError) when no client
        recorded a message for ``stall_s`` (default ``watchdog.stall_bound``: max(60 s, 10
        intervals between messages, the request timeout + 30 s), naming the client processes
        still running, their site and place, and their counts."""
        rate = sum(p.rate for p in self.procs if p.role == "client")
        dog = Watchdog(stall_s if stall_s is not None else
                       stall_bound(1.0 / rate if rate > 0 else None, extra_s=self.timeout_s + 30.0),
                       "messages recorded by the clients")
        deadline = time.monotonic() + limit_s
        clients = [(p, self.servers[p.name]) for p in self.procs if p.role == "client"]
        last = 0.0
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            running = [(p, c) for p, c in clients if c.proc is not None and c.exit_code() is None]
            if not running:
                break
            if time.monotonic() - last >= self.poll_s:
                last = time.monotonic()
                counts = self.counts("client")
                dog.see(sum(counts.values()))
                idle = dog.idle_s()
                self.progress(f"sending: {sum(counts.values())} messages so far"
                              + (f" (none for {idle:.0f} s; the run fails after {dog.bound_s:g} s without)"
                                 if idle >= 15 else ""))
                waiting = "; ".join(f"{p.name} ({self.lab.place(p.site).label}, {len(p.agents)} client(s)): "
                                    f"{counts.get(p.name, 0)} messages" for p, _ in running)
                dog.check(lambda w=waiting: f"{w} (logs in {self.workdir})")  # type: ignore[misc]
            if tick:
                tick()
            time.sleep(0.2)
        else:
            raise ServiceError(f"client processes still running after {limit_s:.0f} s "
                               f"(logs in {self.workdir})")
        bad = [f"{c.what}: exit {code}" for _, c in clients if (code := c.exit_code()) not in (0, None)]
        if bad:
            raise ServiceError("; ".join(bad) + f" (logs in {self.workdir})")

    def counts(self, role: str, argv: Sequence[str] = ("wc", "-l")) -> dict[str, int]:
        """Per process of ``role``: ``argv``'s count of its record file (lines; 0 when not
        there yet), asked at each place once."""
        out: dict[str, int] = {}
        for site, place in self.places.items():
            procs = [p for p in self.procs if p.role == role and p.site == site]
            if not procs:
                continue
            by_file = {str(self.at(p, "jsonl")): p.name for p in procs}
            r = place.run([*argv, *by_file, "/dev/null"], timeout=30)
            for line in r.out.splitlines():
                words = line.split(maxsplit=1)
                if len(words) == 2 and words[0].isdigit() and words[1] in by_file:
                    out[by_file[words[1]]] = int(words[0])
        return out

    def _sizes(self, role: str, argv: Sequence[str]) -> int:
        """The sum of ``argv`` + the record files of ``role``'s processes, per place (``wc``'s
        total: lines or bytes); files not there yet count 0."""
        total = 0
        for site, place in self.places.items():
            files = [str(self.at(p, "jsonl")) for p in self.procs if p.role == role and p.site == site]
            if not files:
                continue
            r = place.run([*argv, *files, "/dev/null"], timeout=30)
            for line in r.out.splitlines():
                words = line.split()
                if len(words) == 2 and words[1] == "total" and words[0].isdigit():
                    total += int(words[0])
        return total

    def sent(self) -> int:
        """Messages the clients have recorded so far (one line each; end lines are few)."""
        return self._sizes("client", ["wc", "-l"])

    def drain(self, quiet_s: float = 2.0, limit_s: float = 30.0) -> float:
        """Wait until the servers' record files stop growing for ``quiet_s`` (late casts and
        fanouts), at most ``limit_s``; returns the seconds waited."""
        t0 = time.monotonic()

        def size() -> int:
            return self._sizes("server", ["wc", "-c"])

        last, since = size(), time.monotonic()
        while time.monotonic() - t0 < limit_s:
            time.sleep(0.2)
            now = size()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
        self._everywhere("stop", "")
        stop_all([self.servers[p.name] for p in self.procs if p.role == "server"], grace_s=60)
        return time.monotonic() - t0

    def collect(self) -> list[Path]:
        """The processes' record files, brought here (every process has exited): compressed at
        the place, checked whole. ServiceError when one does not arrive whole."""
        out = []
        for p in self.procs:
            place, src = self.lab.place(p.site), self.at(p, "jsonl")
            dest = self.path(p.name, "jsonl")
            # every agent process opens its record file as it starts: a missing one is an error
            r = place.run(["sh", "-c", 'wc -c < "$1" && gzip -1 -f "$1"', "sh", str(src)], timeout=300)
            if not r.ok or not r.out.strip().isdigit():
                why = (r.err or r.out).strip().splitlines()
                raise ServiceError(f"{place.label}: {p.name}'s records {src}: "
                                   f"{why[-1] if why else f'exit {r.rc}'}")
            gz = dest.with_name(dest.name + ".gz")
            if not place.fetch(src.with_name(src.name + ".gz"), gz):
                raise ServiceError(f"{place.label}: {src}.gz could not be fetched")
            try:
                data = gzip.decompress(gz.read_bytes())
            except (OSError, EOFError) as e:
                raise ServiceError(f"{place.label}: {src}.gz arrived damaged ({e})") from None
            gz.unlink()
            if len(data) != int(r.out):
                raise ServiceError(f"{place.label}: {src}: {len(data)} of {r.out.strip()} bytes arrived")
            atomic.write_bytes(dest, data)
            out.append(dest)
        return out

    def _bring_back(self) -> None:
        """Logs and plans here, the agent directories removed at every place (what cannot be
        brought back is said, not raised: the run's own outcome stands)."""
        for p in self.procs:
            place = self.lab.place(p.site)
            for what in ("log", "plan.json", "conf"):
                try:
                    place.fetch(self.at(p, what), self.path(p.name, what))
                except (OSError, JuiceError) as e:
                    self.progress(f"{p.name}.{what} not brought back: {e}")
        for site, place in self.places.items():
            try:
                place.remove(self.home(site))
            except (OSError, JuiceError) as e:
                self.progress(f"{place.label}: agent directory not removed: {e}")

    def record_files(self) -> list[Path]:
        return [self.path(p.name, "jsonl") for p in self.procs]

    def logs(self) -> list[Path]:
        return [self.path(p.name, "log") for p in self.procs]
