"""Juice's oslo.messaging RPC agents vs ombt (ombt2 3.0.0), on the SAME RabbitMQ.

    /var/cache/juice/venv/bin/python benchmarks/messaging_vs_ombt.py    # --clients 4 --calls 1000
        # --pause 0.01 --rounds 3 --delay-ms 0 --length 64 --out benchmarks/results/messaging_vs_ombt.json

One ephemeral lab of 2 sites (``--delay-ms`` one-way apart), one RabbitMQ node in site 1, RPC
servers in site 1 and clients in site 2, everything with the messaging venv (oslo.messaging
18.3.1) and the same oslo.config file. Each round runs, in this order:

1. ombt: 1 ``rpc-server`` and ``--clients`` ``rpc-client`` processes (ombt's control on the same
   broker, a fresh ``--topic`` per round), then ``controller rpc-call --calls N --pause P``:
   each client calls N times, CLOSED loop (call, wait for the reply, sleep P). Throughput and
   mean latency are the controller's "Aggregated RPC Client results"; percentiles come from
   the clients' ``--output`` JSON lines. The ombt processes run unmodified ombt code through a
   small wrapper (``WRAPPER``) that only writes a ready file once the process is connected,
   writes the CPU time its ``run_test`` took, and flushes the ``--output`` file on SIGTERM.
2. Juice: 1 server process (1 server) and 1 client process holding the same number of clients
   (``juice.studies.messaging.agents``), OPEN loop, ``arrivals: uniform``, at the throughput ombt
   achieved in this round, for the same number of measured calls (clients × N), after
   ``--warmup-s`` of untimed calls (at least one per client: ombt's clients also make one
   untimed call first). Figures from ``metrics``: throughput = delivery_rate over first
   measured send → last reply, mean call RTT (reply received - sent).

Client CPU per message (user + system, every thread of the process, 10 ms clock ticks):
ombt: os.times() inside each client process around its ``run_test`` (the untimed call + the N
calls + the result report), summed over the clients, / clients × (N + 1). Juice: utime + stime
from /proc/<pid>/stat right after ``go`` (0.5 s before the first call is due) to the process's
own end record (os.times() after its last reply), / every call it made (warm-up included). The
servers' CPU (/proc, same windows; ombt's includes the controller's result polling) and the
clients' lifetime CPU (imports and connecting included) are reported too.

Rounds alternate ombt / Juice in one lab and one broker; every figure is printed with the
load average. Prints the medians and the Juice / ombt ratios; writes everything as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from juice.errors import ServiceError
from juice.lab import LocalLab, spec
from juice.services.buses.rabbitmq import RabbitMQ
from juice.services.buses.rabbitmq import version as rabbitmq_version
from juice.services.process import Server, spawn, stop_all
from juice.studies.messaging import agents as ag
from juice.studies.messaging import buses, metrics
from juice.studies.messaging.spec import Bus
from juice.util import atomic

OUT = Path(__file__).resolve().parent / "results" / "messaging_vs_ombt.json"
SERVER_SITE, CLIENT_SITE = 1, 2

# Runs ombt's own entry point; adds a ready file (after the process's start(): connected to the
# control bus and answering) and flushes ombt's --output files on SIGTERM (ombt buffers them).
# argv: READY_FILE then ombt2's arguments.
WRAPPER = r"""
import json, os, signal, sys
ready = sys.argv[1]
sys.argv = ["ombt2"] + sys.argv[2:]
import ombt
from ombt._main import main
files = []
_init = ombt.FileOutputter.__init__
def _fo_init(self, path):
    _init(self, path)
    files.append(self._fobj)
ombt.FileOutputter.__init__ = _fo_init
def _flush():
    for f in files:
        try:
            f.flush()
        except Exception:
            pass
def _term(*_):
    _flush()
    os._exit(0)
signal.signal(signal.SIGTERM, _term)
_run_test = ombt.RPCTestClient.run_test
def _timed_run_test(self, *args, **kwargs):
    t0 = os.times()
    try:
        return _run_test(self, *args, **kwargs)
    finally:
        t1 = os.times()
        with open(ready + ".cpu.tmp", "w") as f:
            json.dump({"cpu_s": t1.user + t1.system - t0.user - t0.system}, f)
        os.replace(ready + ".cpu.tmp", ready + ".cpu")
ombt.RPCTestClient.run_test = _timed_run_test
for cls in (ombt.RPCTestClient, ombt.RPCTestServer):
    def _start(self, _orig=cls.start):
        _orig(self)
        with open(ready + ".tmp", "w") as f:
            json.dump({"pid": os.getpid(), "name": self.name}, f)
        os.replace(ready + ".tmp", ready)
    cls.start = _start
try:
    main()
finally:
    _flush()
"""


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def load_s() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_s(pid: int | None) -> float | None:
    """utime + stime of ``pid`` (all its threads), seconds; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pcts(rtts_s: list[float]) -> dict[str, float | None]:
    if not rtts_s:
        return {"p50_ms": None, "p90_ms": None, "p99_ms": None}
    x = np.asarray(rtts_s) * 1000
    return {f"p{q}_ms": round(float(np.percentile(x, q)), 3) for q in (50, 90, 99)}


def venv() -> Path:
    return ag.venv_python().parent.parent


def versions() -> dict[str, str]:
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps({k: m.version(k) for k in ('oslo.messaging', 'ombt')}))")
    try:
        cp = subprocess.run([str(ag.venv_python()), "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
        v: dict[str, str] = json.loads(cp.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        v = {}
    v["rabbitmq"] = rabbitmq_version()
    return v


def wait_files(servers: list[tuple[Server, Path]], limit_s: float) -> None:
    t0 = time.monotonic()
    for srv, f in servers:
        srv.wait_ready(f.exists, max(1.0, limit_s - (time.monotonic() - t0)))


# ---- ombt ---------------------------------------------------------------------------------------
CLIENT_RE = re.compile(r"Aggregated RPC Client results:(.*?)Aggregated RPC Server results:(.*)", re.S)


def parse_controller(text: str) -> dict[str, Any]:
    m = CLIENT_RE.search(text)
    if not m:
        raise ServiceError("ombt controller: no results in its output:\n" + text[-2000:])

    def section(s: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if t := re.search(r"Total Messages: (\d+)", s):
            out["total"] = int(t.group(1))
        f = re.search(r"Error: (\d+) message transfers failed", s)
        out["failed"] = int(f.group(1)) if f else 0
        if t := re.search(r"\(([\d.]+) secs\)", s):
            out["interval_s"] = float(t.group(1))
        if t := re.search(r"Aggregate throughput: ([\d.]+) msgs/sec", s):
            out["throughput"] = float(t.group(1))
        if t := re.search(r"Latency (\d+) samples \(msecs\): Average ([\d.]+) StdDev ([\d.-]+) "
                          r"Min ([\d.]+) Max ([\d.]+)", s):
            out.update(samples=int(t.group(1)), mean_ms=float(t.group(2)), sd_ms=float(t.group(3)),
                       min_ms=float(t.group(4)), max_ms=float(t.group(5)))
        return out

    return {"clients": section(m.group(1)), "servers": section(m.group(2))}


def ombt_messages(files: list[Path]) -> list[dict[str, Any]]:
    return [r for r in metrics.json_lines(files) if "id" in r and ("stop" in r or "recv" in r)]


def ombt_round(lab: LocalLab, url: str, conf: Path, work: Path, rnd: int, a: argparse.Namespace,
               timeout_s: int) -> dict[str, Any]:
    d = work / f"ombt-{rnd}"
    d.mkdir(parents=True)
    py = str(ag.venv_python())
    ombt2 = str(venv() / "bin" / "ombt2")
    common = ["--url", url, "--topic", f"juice-vs-{rnd}-{secrets.token_hex(2)}",
              "--timeout", str(timeout_s), "--oslo-config", str(conf)]
    procs: list[Server] = []
    try:
        ready_s = d / "server.ready"
        srv = spawn(lab.place(SERVER_SITE), [py, "-c", WRAPPER, str(ready_s), *common, "rpc-server",
                                       "--name", "srv0", "--output", str(d / "server.jsonl")],
                    log=d / "server.log", what="ombt rpc-server")
        procs.append(srv)
        wait_files([(srv, ready_s)], 90)
        clients: list[tuple[Server, Path]] = []
        for i in range(a.clients):
            ready = d / f"client{i}.ready"
            c = spawn(lab.place(CLIENT_SITE), [py, "-c", WRAPPER, str(ready), *common, "rpc-client",
                                         "--name", f"cli{i}", "--output", str(d / f"client{i}.jsonl")],
                      log=d / f"client{i}.log", what=f"ombt rpc-client {i}")
            procs.append(c)
            clients.append((c, ready))
        wait_files(clients, 90 + 2 * a.clients)
        pids = [c.pid for c, _ in clients]
        cpu_total0 = [cpu_s(p) or 0.0 for p in pids]
        srv_cpu0 = cpu_s(srv.pid) or 0.0
        load0 = load()
        ctl = spawn(lab.place(SERVER_SITE),
                    [py, ombt2, *common, "controller", "rpc-call", "--calls", str(a.calls),
                     "--pause", str(a.pause), "--length", str(a.length)],
                    log=d / "controller.log", what="ombt controller")
        procs.append(ctl)
        assert ctl.child is not None
        limit = timeout_s * 2 + 60
        try:
            rc = ctl.child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise ServiceError(f"ombt controller still running after {limit} s (logs in {d})") from None
        cpu_read = [cpu_s(p) for p in pids]   # before the clients are told to exit
        srv_cpu1 = cpu_s(srv.pid)
        text = (d / "controller.log").read_text()
        if rc != 0:
            raise ServiceError(f"ombt controller: exit {rc} (logs in {d}):\n{text[-2000:]}")
        # each client writes its test's CPU right after reporting its results (bounded wait)
        wait_files([(c, r.with_name(r.name + ".cpu")) for c, r in clients], 15)
    finally:
        stop_all(procs, grace_s=15)
    res = parse_controller(text)
    cli = res["clients"]
    cpu_total1 = [c for c in cpu_read if c is not None]
    if len(cpu_total1) != len(pids) or srv_cpu1 is None:
        raise ServiceError(f"an ombt client or server exited before the end (logs in {d})")
    cpu_proc = sum(c1 - c0 for c0, c1 in zip(cpu_total0, cpu_total1, strict=True))
    cpu = sum(float(json.loads(r.with_name(r.name + ".cpu").read_text())["cpu_s"]) for _, r in clients)
    calls = a.clients * (a.calls + 1)          # + each client's untimed self_ready call
    msgs = ombt_messages([d / f"client{i}.jsonl" for i in range(a.clients)])
    ok = [float(m["stop"]) - float(m["start"]) for m in msgs if "stop" in m and "error" not in m]
    recvs = ombt_messages([d / "server.jsonl"])
    oneway = [float(m["recv"]) - float(m["start"]) for m in recvs if "recv" in m]
    n = int(cli.get("total") or 0)
    return {
        "tool": "ombt", "round": rnd, "load_before": load0, "load_after": load(),
        "throughput": cli.get("throughput"), "mean_ms": cli.get("mean_ms"),
        "messages": n, "failed": cli.get("failed"), "interval_s": cli.get("interval_s"),
        **pcts(ok), "per_message_rows": len(msgs),
        "oneway_p50_ms": pcts(oneway)["p50_ms"],
        "client_processes": a.clients, "calls_in_cpu_window": calls,
        "client_cpu_s": round(cpu, 3), "client_cpu_s_proc": round(cpu_proc, 3),
        "client_cpu_ms_per_msg": round(1000 * cpu / calls, 4),
        "client_cpu_ms_per_msg_lifetime": round(1000 * sum(cpu_total1) / calls, 4),
        "server_cpu_ms_per_msg": round(1000 * (srv_cpu1 - srv_cpu0) / calls, 4),
        "controller": res,
    }


# ---- Juice ----------------------------------------------------------------------------------------
@dataclass
class CountedRun(ag.AgentRun):
    """An AgentRun whose client processes stop after ``count`` sends (the agent's ``count``)."""

    count: int = 0

    def _plan(self, p: ag.ProcPlan) -> dict[str, Any]:
        plan = super()._plan(p)
        plan["count"] = self.count
        return plan


def juice_round(lab: LocalLab, url: str, conf_text: str, work: Path, rnd: int, a: argparse.Namespace,
                rate: float, timeout_s: int) -> dict[str, Any]:
    agents = ag.layout("tc1", a.clients, 1, 1, "call", 2, [CLIENT_SITE], [SERVER_SITE])
    procs = ag.pack(agents, per_process=a.clients + 1, rate=rate)
    expected = ag.expected_per_message(agents)
    measured = a.clients * a.calls
    # untimed warm-up calls first: at least one per client (as ombt's), and at least
    # --warmup-s of sending (the transport's first call sets up its reply queue, ~30 ms, and
    # the open-loop calls due meanwhile wait for it; ombt's closed loop hides this)
    warm = max(a.clients, math.ceil(rate * a.warmup_s))
    count = measured + warm
    send_s = count / rate
    d = work / f"juice-{rnd}"

    def progress(msg: str) -> None:
        print(f"    juice: {msg}", flush=True)

    with CountedRun(lab, d, lambda _site: url, conf_text, progress, duration_s=send_s + 1,
                    timeout_s=timeout_s, length=a.length, pool=32, arrivals="uniform", seed=rnd + 1,
                    count=count) as ar:
        ar.start(procs)
        names = [p.name for p in procs if p.role == "client"]
        pids = {p.name: ar.servers[p.name].pid for p in procs}
        load0 = load()
        start_at = ar.go()                     # returns 0.5 s before the first send is due
        cpu0 = {k: cpu_s(pid) or 0.0 for k, pid in pids.items()}
        ar.wait_clients(send_s + timeout_s + 60)
        ar.drain(quiet_s=1.0, limit_s=15)
        sends, recvs, ends = metrics.read_records(ar.record_files())
    warm_until = start_at + (warm - 0.5) / rate   # uniform: message n is due at start + n / rate
    msgs = metrics.messages(sends, recvs, expected, warm_until)
    m = msgs[~msgs["warmup"] & ~msgs["skipped"]]
    window = float(m["t_done"].max() - m["t_send"].min()) if len(m) else 0.0
    s = metrics.summarize(msgs, recvs, window)
    end_by_pid = {e.get("pid"): e for e in ends if e.get("k") == "end"}
    cpu_end = {k: float(end_by_pid.get(pid, {}).get("cpu_s") or float("nan")) for k, pid in pids.items()}
    cli_cpu = sum(cpu_end[k] - cpu0[k] for k in names)
    cli_life = sum(cpu_end[k] for k in names)
    srv_cpu = sum(cpu_end[k] - cpu0[k] for k in pids if k not in names)
    calls = int(sends["t_send"].notna().sum())   # every call made, warm-up included
    return {
        "tool": "juice", "round": rnd, "load_before": load0, "load_after": load(),
        "offered_rate": round(rate, 2), "throughput": s["delivery_rate"], "mean_ms": s["rtt_mean_ms"],
        "messages": int(s["sent"]), "failed": int(s["errors"]) + int(s["skipped"]), "lost": s["lost"],
        "interval_s": round(window, 3),
        "p50_ms": s["rtt_p50_ms"], "p90_ms": s["rtt_p90_ms"], "p99_ms": s["rtt_p99_ms"],
        "rtt_int_p99_ms": s["rtt_int_p99_ms"], "generator_lag_p99_ms": s["generator_lag_p99_ms"],
        "oneway_p50_ms": s["oneway_p50_ms"],
        "warmup_calls": warm, "client_processes": len(names), "calls_in_cpu_window": calls,
        "client_cpu_s": round(cli_cpu, 3),
        "client_cpu_ms_per_msg": round(1000 * cli_cpu / calls, 4) if calls else None,
        "client_cpu_ms_per_msg_lifetime": round(1000 * cli_life / calls, 4) if calls else None,
        "server_cpu_ms_per_msg": round(1000 * srv_cpu / calls, 4) if calls else None,
    }


# ---- main -----------------------------------------------------------------------------------------
def say(r: dict[str, Any]) -> None:
    head = f"[round {r['round'] + 1}] {r['tool']:5}"
    offered = f"offered {r['offered_rate']:.1f}/s → " if r["tool"] == "juice" else ""
    lag = f", sender lag p99 {r['generator_lag_p99_ms']} ms" if r["tool"] == "juice" else ""
    print(f"{head}: {offered}{r['throughput']:.1f} msg/s, mean {r['mean_ms']:.2f} ms "
          f"(p50 {r['p50_ms']} p99 {r['p99_ms']} ms), {r['messages']} msgs {r['failed']} failed, "
          f"client CPU {r['client_cpu_ms_per_msg']} ms/msg ({r['client_processes']} proc), "
          f"server CPU {r['server_cpu_ms_per_msg']} ms/msg{lag}; load {r['load_before']} → {r['load_after']}",
          flush=True)


def med(rows: list[dict[str, Any]], tool: str, key: str) -> float | None:
    xs = [r[key] for r in rows if r["tool"] == tool and r.get(key) is not None]
    return round(statistics.median(xs), 4) if xs else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=4, help="RPC clients (ombt: one process each)")
    ap.add_argument("--calls", type=int, default=1000, help="calls per client per round")
    ap.add_argument("--pause", type=float, default=0.01,
                    help="ombt: seconds each client sleeps after each reply (keeps the bus unsaturated)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay between the 2 sites")
    ap.add_argument("--length", type=int, default=64, help="payload bytes per call")
    ap.add_argument("--warmup-s", type=float, default=0.5,
                    help="Juice: untimed sending before the measured calls (at least 1 call per client)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, records)")
    a = ap.parse_args()
    if a.clients < 1 or a.calls < 1 or a.rounds < 1 or a.pause < 0:
        ap.error("--clients, --calls, --rounds must be ≥ 1 and --pause ≥ 0")
    if not (venv() / "bin" / "ombt2").exists():
        raise SystemExit(f"{venv() / 'bin' / 'ombt2'} missing: run scripts/setup.sh (the messaging venv)")
    # generous RPC / controller timeout: a client's N calls must fit in it (ombt waits that long
    # for each client's result)
    timeout_s = int(max(60, a.calls * (a.pause + 0.05) * 2 + 30))
    conf_text = buses.conf_text(Bus(kind="rabbitmq"), min(timeout_s, 600))
    work = Path(tempfile.mkdtemp(prefix="juice-vs-ombt-", dir="/var/tmp"))
    (work / "oslo.conf").write_text(conf_text)
    rows: list[dict[str, Any]] = []
    ok = False
    print(f"work dir {work}; load {load_s()}", flush=True)
    lab_spec = spec.parse({"name": "mo" + secrets.token_hex(3), "sites": 2, "delay_ms": a.delay_ms})
    try:
        with LocalLab.up(lab_spec, ephemeral=True) as lab:
            mq = RabbitMQ(lab, nodes=[SERVER_SITE])
            try:
                t0 = time.monotonic()
                mq.up(timeout=120)
                print(f"rabbitmq up in {time.monotonic() - t0:.1f} s (site {SERVER_SITE}); {a.clients} "
                      f"clients in site {CLIENT_SITE}, {a.delay_ms:g} ms one-way; load {load_s()}",
                      flush=True)
                url = mq.url(SERVER_SITE)
                for rnd in range(a.rounds):
                    o = ombt_round(lab, url, work / "oslo.conf", work, rnd, a, timeout_s)
                    rows.append(o)
                    say(o)
                    if not o["throughput"]:
                        raise ServiceError(f"ombt round {rnd + 1}: no throughput figure")
                    j = juice_round(lab, url, conf_text, work, rnd, a, float(o["throughput"]), timeout_s)
                    rows.append(j)
                    say(j)
            finally:
                mq.stop()
        ok = True
    finally:
        if ok and not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        elif rows or not ok:
            print(f"work dir kept: {work}")
    keys = ("throughput", "mean_ms", "p50_ms", "p99_ms", "client_cpu_ms_per_msg",
            "client_cpu_ms_per_msg_lifetime", "server_cpu_ms_per_msg")
    medians = {t: {k: med(rows, t, k) for k in keys} for t in ("ombt", "juice")}

    def ratio(k: str) -> float | None:
        o, j = medians["ombt"][k], medians["juice"][k]
        return round(j / o, 3) if o and j is not None else None

    ratios = {k: ratio(k) for k in keys}
    print(f"\nmedians over {a.rounds} round(s); load {load_s()}")
    print(f"{'':34} {'ombt':>10} {'juice':>10} {'juice/ombt':>11}")
    for k, label in (("throughput", "throughput, msg/s"), ("mean_ms", "mean call latency, ms"),
                     ("p50_ms", "p50 call latency, ms"), ("p99_ms", "p99 call latency, ms"),
                     ("client_cpu_ms_per_msg", "client CPU, ms/msg (test window)"),
                     ("client_cpu_ms_per_msg_lifetime", "client CPU, ms/msg (lifetime)"),
                     ("server_cpu_ms_per_msg", "server CPU, ms/msg (test window)")):
        print(f"{label:34} {medians['ombt'][k]!s:>10} {medians['juice'][k]!s:>10} {ratios[k]!s:>11}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(a.out, json.dumps({
        "params": {"clients": a.clients, "calls": a.calls, "pause_s": a.pause, "rounds": a.rounds,
                   "delay_ms": a.delay_ms, "length": a.length, "warmup_s": a.warmup_s,
                   "timeout_s": timeout_s, "sites": 2,
                   "broker_site": SERVER_SITE, "server_site": SERVER_SITE, "client_site": CLIENT_SITE},
        "versions": versions(), "cpus": os.cpu_count(), "oslo_conf": conf_text,
        "rows": rows, "medians": medians, "ratios_juice_over_ombt": ratios, "load_end": load()},
        indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
