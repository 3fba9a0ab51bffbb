"""The resource sampler's own cost (not a test: it measures, it does not assert).

    python benchmarks/profile_overhead.py [--sites 45] [--procs 100] [--seconds 30] [--rates 1,10]

Builds an ephemeral lab of ``--sites`` sites, starts ``--procs`` cheap processes (``sleep``)
spread over them, then for each rate runs the sampler (``juice.profile.sampler.Sampler``, as
the runner does around every run) for ``--seconds`` and reports its own CPU per second of
wall time: the CPU time of its thread in the ticks (``tick_cpu_pct``: the steady state), and
all of it including start and writing profile.parquet (``sampler_cpu_pct``). Also printed:
the cost of one scan of /proc (discovery) and of one tick, and the load average (other work
on the machine inflates CPU time through cache misses; re-run it idle). Goal: at most 1 % of
one core at 1 Hz with 45 sites and 100 processes. JSON goes to benchmarks/results/.

``--host-tick``: instead, the cost of one tick of the SSH hosts' sampler
(``juice.profile.hosts``: its remote program, run here in this process on this machine's
/proc, ``--procs`` sleeping processes recorded as its agent's), no lab needed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from juice.lab import LocalLab, spec
from juice.profile import sampler
from juice.util import atomic

OUT = Path(__file__).parent / "results"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _micro(s: sampler.Sampler, n: int = 50) -> dict[str, float]:
    """Mean CPU ms of one /proc scan and of one tick (the sampler's own methods, this thread)."""
    s._discover()
    c0 = time.thread_time()
    for _ in range(n):
        s._discover()
    disc = (time.thread_time() - c0) / n
    c0 = time.thread_time()
    for _ in range(n):
        s._next_discovery = 0.0  # a full tick: scan + samples
        s._tick()
    tick = (time.thread_time() - c0) / n
    return {"discover_ms": round(disc * 1e3, 3), "tick_ms": round(tick * 1e3, 3)}


def one_rate(lab: LocalLab, hz: float, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        load0 = os.getloadavg()
        cpu0, t0 = _cpu(), time.monotonic()
        s = sampler.start(lab, list, Path(tmp), sampler.Settings(interval_s=1.0 / hz), print)
        assert s is not None
        time.sleep(seconds)
        summ = s.stop()
        wall, cpu = time.monotonic() - t0, _cpu() - cpu0
        size = (Path(tmp) / sampler.PROFILE_TABLE).stat().st_size
    row = {"hz": hz, "seconds": round(wall, 2), "processes": summ["processes"], "sites": summ["sites"],
           "ticks": summ["ticks"], "late_ticks": summ["late_ticks"], "rows": summ["rows"],
           "table_bytes": size, "tick_cpu_pct": summ["tick_cpu_pct"],
           "sampler_cpu_pct": summ["sampler_cpu_pct"], "sampler_cpu_s": summ["sampler_cpu_s"],
           "process_cpu_pct": round(100 * cpu / wall, 3), "errors": summ["errors"],
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    print(f"{hz:>4g} Hz, {row['seconds']} s: {row['processes']} processes in {row['sites']} sites, "
          f"{row['ticks']} ticks ({row['late_ticks']} late), {row['rows']} rows ({size / 1024:.0f} KiB): "
          f"sampler {row['tick_cpu_pct']} % of one core in ticks, {row['sampler_cpu_pct']} % "
          f"with start+write (whole process {row['process_cpu_pct']} %); load average "
          f"{row['loadavg_before']} -> {row['loadavg_after']}")
    return row


def host_tick(procs: int, n: int = 50) -> dict[str, Any]:
    """CPU of one tick of the hosts' remote sampler (``juice.onhost.sampler.LabSampler``)."""
    import contextlib
    import io
    import subprocess

    from juice.onhost import sampler as onhost

    kids = [subprocess.Popen(["sleep", "3600"]) for _ in range(procs)]
    try:
        with tempfile.TemporaryDirectory() as root:
            (Path(root) / "agent.json").write_text(json.dumps(
                {"agent": [os.getpid(), None], "procs": [[k.pid, None] for k in kids]}))
            sampler = onhost.LabSampler({"root": root, "wan_if": "lo", "interval_s": 1.0, "max_s": 60.0},
                                        onhost.Channel())
            with contextlib.redirect_stdout(io.StringIO()):
                sampler.sample()
                c0 = time.process_time()
                for _ in range(n):
                    sampler.sample()
                tick = (time.process_time() - c0) / n
            chosen = sum(1 for k in sampler.known.values() if k.why)
    finally:
        for k in kids:
            k.kill()
            k.wait()
    total = sum(1 for p in os.listdir("/proc") if p.isdigit())
    row = {"tick_ms": round(tick * 1e3, 3), "sampled": chosen, "proc_entries": total}
    print(f"hosts' sampler: one tick {row['tick_ms']} ms CPU ({chosen} processes sampled, every one of "
          f"~{total} in /proc read for its stat): {row['tick_ms'] / 10:.2f} % of one core at 1 Hz")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", type=int, default=45)
    ap.add_argument("--procs", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rates", default="1,10")
    ap.add_argument("--host-tick", action="store_true", help="the SSH hosts' sampler's tick only")
    a = ap.parse_args()
    if a.host_tick:
        OUT.mkdir(exist_ok=True)
        atomic.write_text(OUT / "profile_overhead_hosts.json", json.dumps(host_tick(a.procs), indent=2))
        return
    rates = [float(x) for x in a.rates.split(",")]
    t0 = time.monotonic()
    with LocalLab.up(spec.parse({"name": "bprof", "sites": a.sites, "delay_ms": 0}),
                     ephemeral=True, replace=True) as lab:
        print(f"lab: {a.sites} sites up in {time.monotonic() - t0:.1f} s ({lab.state.backend})")
        kids = [lab.popen(1 + i % a.sites, ["sleep", "3600"]) for i in range(a.procs)]
        try:
            time.sleep(1.0)
            s = sampler.start(lab, list, Path(tempfile.gettempdir()), sampler.Settings(interval_s=60), print)
            assert s is not None
            micro = _micro(s)
            s.stop(keep=False)
            print(f"one /proc scan: {micro['discover_ms']} ms CPU; one full tick (scan + "
                  f"{len(kids)} processes + {a.sites} links): {micro['tick_ms']} ms CPU; "
                  f"/proc holds {sum(1 for p in os.listdir('/proc') if p.isdigit())} processes")
            rows = [one_rate(lab, hz, a.seconds) for hz in rates]
        finally:
            for k in kids:
                k.kill()
                k.wait()
    OUT.mkdir(exist_ok=True)
    atomic.write_text(OUT / "profile_overhead.json",
                      json.dumps({"sites": a.sites, "procs": a.procs, "micro": micro, "rates": rows,
                                  "cpus": os.cpu_count()}, indent=2))


if __name__ == "__main__":
    main()
