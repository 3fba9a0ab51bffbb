"""``juice-rpc-agent PLAN.json``: many logical oslo.messaging RPC agents in one process.

Juice's messaging study (``juice.studies.messaging``) writes one plan per process and runs it
inside a lab site with the messaging venv's interpreter. A process hosts

- ``servers``: real ``oslo_messaging`` RPC servers (threading executor), one per logical server,
  each with its own target (``topic``, ``server``) and the endpoint below; every delivery is
  recorded as ``{"k": "recv", "id", "srv", "site", "t"}``;
- ``clients``: real ``oslo_messaging`` RPC clients sharing the process's transport. One pacer
  thread sends at INTENDED times (open loop, like wrk2: a late send is not
  forgiven, latency counts from the intended time) round-robin over the clients: ``t0 + i / rate``
  (``arrivals: uniform``) or a Poisson process of that rate (``poisson``, seeded); calls and casts
  run in a bounded thread pool (``pool``); when more than ``backlog`` sends are waiting, the next
  ones are recorded as ``skipped`` (the generator, not the bus, is saturated) instead of piling
  up. Each message carries its id (``<run>.<client>:<seq>``) and send time; each result is recorded as
  ``{"k": "send", "id", "cli", "site", "topic", "m", "t_int", "t_send", "t_done", "ok", "err",
  "srv", "t_srv"}``.

All sites of one machine share one clock, so server-side receive times minus send times are
exact one-way delays (ombt needs synchronised clocks for that).

Protocol with the controller (files only, every wait bounded):

1. the process starts its transport, servers and clients, then writes ``ready`` (pid, RSS,
   start-up seconds, agents) atomically;
2. clients wait for ``go`` (JSON ``{"start_at": epoch}``), send for ``duration_s`` (or ``count``
   messages), wait for the outstanding calls, write their records and exit;
3. servers run until the ``stop`` file appears (or ``max_life_s``), then stop and exit.

Records are appended to ``out`` (JSON lines) by a writer thread as they come, so a crash keeps
what was recorded up to then; a last line ``{"k": "end", ...}`` marks a clean finish.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

POLL_S = 0.05


def log(msg: str) -> None:
    print(f"[agent {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s() -> float:
    t = os.times()
    return round(t.user + t.system, 3)


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def wait_for(path: Path, limit_s: float, stop: threading.Event) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not stop.is_set():
        if path.exists():
            return True
        time.sleep(POLL_S)
    return path.exists()


class Recorder:
    """A writer thread appending JSON lines to ``out``; ``put`` is cheap and thread-safe."""

    def __init__(self, out: Path) -> None:
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.out = out
        self.count = 0
        self.thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self.thread.start()

    def put(self, rec: dict[str, Any]) -> None:
        self.q.put(rec)

    def _run(self) -> None:
        with self.out.open("a", buffering=1 << 16) as f:
            while True:
                rec = self.q.get()
                if rec is None:
                    break
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
                self.count += 1
                if self.q.empty():
                    f.flush()

    def close(self, timeout: float = 60.0) -> None:
        self.q.put(None)
        self.thread.join(timeout)


class Endpoint:
    """What every logical server exposes: ``ping`` (call/cast/fanout) records and echoes."""

    def __init__(self, srv: str, site: int, rec: Recorder, work_s: float) -> None:
        self.srv, self.site, self.rec, self.work_s = srv, site, rec, work_s

    def ping(self, ctxt: dict[str, Any], id: str, sent: float, payload: str) -> dict[str, Any]:
        t = time.time()
        self.rec.put({"k": "recv", "id": id, "srv": self.srv, "site": self.site, "t": t,
                      "sent": sent})
        if self.work_s > 0:
            time.sleep(self.work_s)
        return {"srv": self.srv, "site": self.site, "t": t}


def setup_conf(plan: dict[str, Any]) -> Any:
    from oslo_config import cfg

    # The global CONF: oslo.messaging 18.3.1 registers [oslo_messaging_tracing] on cfg.CONF only.
    # later files override earlier ones (the study: the common file, then the process's own)
    files = list(plan.get("conf_files") or ([plan["conf_file"]] if plan.get("conf_file") else []))
    cfg.CONF([], project="juice-agent", default_config_files=files, default_config_dirs=[])
    return cfg.CONF


def start_servers(om: Any, transport: Any, plan: dict[str, Any], rec: Recorder) -> list[Any]:
    servers = []
    for s in plan.get("servers", []):
        target = om.Target(topic=s["topic"], server=s["id"])
        ep = Endpoint(s["id"], plan["site"], rec, float(plan.get("work_s", 0.0)))
        srv = om.get_rpc_server(transport, target, [ep], executor="threading")
        srv.start()
        servers.append(srv)
    return servers


class Pacer:
    """Open-loop sending for the process's clients (see the module docstring)."""

    def __init__(self, om: Any, transport: Any, plan: dict[str, Any], rec: Recorder) -> None:
        self.om, self.plan, self.rec = om, plan, rec
        self.site = plan["site"]
        timeout = float(plan.get("timeout_s", 30.0))
        self.clients = []
        for c in plan.get("clients", []):
            cli = om.get_rpc_client(transport, om.Target(topic=c["topic"]), timeout=timeout)
            if c["m"] == "fanout":
                cli = cli.prepare(fanout=True)
            self.clients.append((c, cli))
        self.pool = ThreadPoolExecutor(max_workers=int(plan.get("pool", 32)),
                                       thread_name_prefix="send")
        self.backlog = int(plan.get("backlog", 1000))
        self.pending = 0
        self.lock = threading.Lock()
        self.payload = "x" * int(plan.get("length", 0))
        # ids are unique per run: a late message of an earlier run on the same topics is not
        # mistaken for one of this run
        self.run_tag = f"{plan['run']}." if plan.get("run") else ""
        self.sent = self.done = self.errors = self.skipped = 0

    def _one(self, c: dict[str, Any], cli: Any, mid: str, t_int: float) -> None:
        t_send = time.time()
        r: dict[str, Any] = {"k": "send", "id": mid, "cli": c["id"], "site": self.site,
                             "topic": c["topic"], "m": c["m"], "t_int": t_int, "t_send": t_send}
        try:
            if c["m"] == "call":
                reply = cli.call({}, "ping", id=mid, sent=t_send, payload=self.payload)
                r["srv"], r["t_srv"] = reply.get("srv"), reply.get("t")
            else:
                cli.cast({}, "ping", id=mid, sent=t_send, payload=self.payload)
            r["ok"] = True
        except Exception as e:  # every failure is a result: recorded by class and message
            r["ok"] = False
            r["err"] = f"{type(e).__name__}: {str(e)[:200]}"
            with self.lock:
                self.errors += 1
        r["t_done"] = time.time()
        self.rec.put(r)
        with self.lock:
            self.pending -= 1
            self.done += 1

    def run(self, start_at: float, stop: threading.Event) -> None:
        if not self.clients:
            return
        rate = float(self.plan["rate"])
        duration = float(self.plan.get("duration_s") or 0)
        count = int(self.plan.get("count") or 0)
        # uniform: t0 + n / rate; poisson: exponential gaps of mean 1 / rate (independent
        # processes then do not send in lock-step, which would correlate their arrivals).
        poisson = self.plan.get("arrivals", "poisson") == "poisson"
        rng = random.Random(self.plan.get("seed", 0))
        n = 0
        t_int = start_at + (rng.expovariate(rate) if poisson else 0.0)
        while not stop.is_set():
            if n:
                t_int = t_int + rng.expovariate(rate) if poisson else start_at + n / rate
            if (count and n >= count) or (not count and t_int >= start_at + duration):
                break
            delay = t_int - time.time()
            if delay > 0:
                time.sleep(delay)
            c, cli = self.clients[n % len(self.clients)]
            seq = n // len(self.clients)
            mid = f"{self.run_tag}{c['id']}:{seq}"
            n += 1
            with self.lock:
                full = self.pending >= self.backlog
                if not full:
                    self.pending += 1
                    self.sent += 1
            if full:
                self.skipped += 1
                self.rec.put({"k": "send", "id": mid, "cli": c["id"], "site": self.site,
                              "topic": c["topic"], "m": c["m"], "t_int": t_int, "t_send": None,
                              "t_done": None, "ok": False, "err": "skipped: generator backlog full"})
                continue
            self.pool.submit(self._one, c, cli, mid, t_int)
        self.pool.shutdown(wait=True)


def run(plan: dict[str, Any]) -> int:
    import oslo_messaging as om

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    t0 = time.monotonic()
    out = Path(plan["out"])
    rec = Recorder(out)
    setup_conf(plan)
    transport = om.get_rpc_transport(__import__("oslo_config").cfg.CONF, url=plan["url"])
    servers = start_servers(om, transport, plan, rec)
    pacer = Pacer(om, transport, plan, rec) if plan.get("clients") else None
    ready = {"pid": os.getpid(), "site": plan["site"], "rss_kib": rss_kib(),
             "startup_s": round(time.monotonic() - t0, 3), "servers": len(servers),
             "clients": len(pacer.clients) if pacer else 0, "threads": threading.active_count()}
    cpu_ready = cpu_s()
    cpu_go = None
    write_json_atomic(Path(plan["ready"]), ready)
    log(f"ready: {ready}")
    status = 0
    if pacer is not None:
        if not wait_for(Path(plan["go"]), float(plan.get("max_wait_s", 600)), stop):
            log("no go file in time: exiting")
            status = 3
        else:
            start_at = float(json.loads(Path(plan["go"]).read_text())["start_at"])
            cpu_go = cpu_s()
            pacer.run(start_at, stop)
            log(f"clients done: sent {pacer.sent}, finished {pacer.done}, errors {pacer.errors}, "
                f"skipped {pacer.skipped}")
    if servers:
        wait_for(Path(plan["stop"]), float(plan.get("max_life_s", 3600)), stop)
        for s in servers:
            s.stop()
        for s in servers:
            s.wait()
    # cpu_s: the whole life (imports included); cpu_ready_s: at ready; cpu_go_s: when sending
    # began (clients) -- the differences are what the run itself cost
    end: dict[str, Any] = {"k": "end", "pid": os.getpid(), "rss_kib_end": rss_kib(), "cpu_s": cpu_s(),
                           "cpu_ready_s": cpu_ready, "cpu_go_s": cpu_go}
    if pacer is not None:
        end.update(sent=pacer.sent, done=pacer.done, errors=pacer.errors, skipped=pacer.skipped)
    rec.put(end)
    rec.close()
    transport.cleanup()
    return status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="juice-rpc-agent", description=__doc__.splitlines()[0])
    ap.add_argument("plan", type=Path, help="the process's plan (JSON), written by Juice")
    args = ap.parse_args(argv)
    try:
        plan = json.loads(args.plan.read_text())
    except (OSError, ValueError) as e:
        print(f"juice-rpc-agent: {args.plan}: {e}", file=sys.stderr)
        return 2
    return run(plan)


if __name__ == "__main__":
    sys.exit(main())
