"""The distortion of many simulated nodes per nova-compute process, and whether forking one
nova-compute per node removes it: per-phase times (``juice trace``) at 20, 60 and 200 concurrent
boots, each layout on a fresh stack, alternated.

    /var/cache/juice/venv/bin/python benchmarks/nova_distortion.py --nodes 20 --nodes-per-process 20 \
        --concurrency 20 60 200 --rounds 3
    # validation only (small): --nodes 4 --nodes-per-process 4 --concurrency 4 --times 4 --rounds 1

A real compute host is one nova-compute process per node. Juice's multi-node fake driver puts
K nodes in one process, and these K nodes then share what a process owns: one build pool
(``max_concurrent_builds``), one resource tracker and its claim lock
(``COMPUTE_RESOURCE_SEMAPHORE``), one RPC consumer and executor (one ``compute.<host>`` queue,
``executor_thread_pool_size`` threads), one heartbeat, one interpreter. Three layouts of the
same ``--nodes`` nodes (same size):

- ``1pp``: ``--nodes`` nova-compute processes x 1 node (the reference: what a real cloud has);
- ``Kpp``: ``--nodes``/K processes x K nodes (``--nodes-per-process`` K; default all in one);
- ``fork``: ``--nodes``/K processes x K nodes with ``computes.isolation: fork``: each process
  forks one nova-compute per node (``juice_nova.fork``), each its own service.

``max_concurrent_builds`` is ``--builds-per-node`` x nodes per nova service (0, the default:
nova's 10 per service in every layout, the study's setting, so the shared limit is part of what
``Kpp`` changes). Every run gets a FRESH identical stack (one lab, ``--sites`` sites, 0 ms;
MariaDB, RabbitMQ, Keystone, placement, the fakes, nova-api, conductor, one scheduler in site 1;
the computes spread over sites 2..N) that differs only in the layout; for each round and each
concurrency the layouts run one after the other (1pp, Kpp, fork, then the next), so drift on a
shared host hits all of them. Each run boots ``--times`` servers (default 2 x concurrency) with
the study's ``NovaServers.boot_server`` (Juice's driver, site 1); then the stack's logs are
traced (``juice.trace``: per boot, its phases api, rpc_scheduler, scheduler, rpc_conductor,
conductor, rpc_compute, claim, spawn, finish).

Reported per run: successes, nova's boot time (create.end - POST), every phase's mean, the
computes' RSS and memory per node (USS/PSS of forked children from smaps_rollup), their CPU
during the window and the load average before and after. Then per concurrency and layout,
pooled over rounds: each phase's mean with its 95 % interval (bootstrap, runs as clusters) and,
for Kpp and fork, the difference to 1pp with its verdict (REAL: the interval excludes 0).
Writes benchmarks/results/nova_distortion.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from nova_vs_rally import FLAVOR_NAME, juice_job, load, quantiles

from juice.lab import LocalLab
from juice.lab import spec as labspec
from juice.load.drivers import run_drivers
from juice.load.iterations import iteration_rows
from juice.services.openstack.nova_conf import ComputeOptions, NovaOptions, spread
from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
from juice.studies.nova import metrics

OUT = Path(__file__).resolve().parent / "results" / "nova_distortion.json"
SCENARIO = "NovaServers.boot_server"
TICK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / TICK   # utime, stime
    except (OSError, IndexError, ValueError):
        return 0.0


def nodes_built_on(logs: Sequence[Path], since: float) -> set[str]:
    """The nodes (not service hosts) in compute's ``instance.create.end`` notifications since ``since``."""
    out: set[str] = set()
    for p in logs:
        try:
            lines = p.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if "instance.create.end" not in line:
                continue
            msg = metrics._notification(line)
            if msg is None or (metrics._epoch(str(msg.get("timestamp", ""))) or 0) < since:
                continue
            node = ((msg.get("payload") or {}).get("nova_object.data") or {}).get("node")
            if node:
                out.add(str(node))
    return out


LAYOUTS = ("1pp", "Kpp", "fork")
PHASES = ("api", "rpc_scheduler", "scheduler", "rpc_conductor", "conductor", "rpc_compute", "claim",
          "spawn", "finish")


def layout(name: str, a: argparse.Namespace) -> ComputeOptions:
    sites = range(2, a.sites + 1)
    k = a.nodes_per_process or a.nodes
    procs, per = (a.nodes, 1) if name == "1pp" else (a.nodes // k, k)
    per_service = 1 if name in ("1pp", "fork") else per
    builds = per_service * a.builds_per_node if a.builds_per_node else 10
    return ComputeOptions(sites=spread(procs, sites), nodes_per_process=per, vcpus=a.vcpus,
                          memory_mb=a.memory_mb, disk_gb=a.disk_gb, max_concurrent_builds=builds,
                          isolation="fork" if name == "fork" else "shared")


def traced_boots(dep: NovaDeployment, dest: Path) -> pd.DataFrame:
    """The run's boots as ``juice trace`` cuts them: the stack's logs fetched into ``dest``."""
    from juice.trace.tables import trace

    dest.mkdir(parents=True, exist_ok=True)
    for svc in (dep.nova, dep.computes, dep.placement):
        for place, log in svc.logs():
            place.fetch(log, dest / log.name)
    boots: pd.DataFrame = trace([dest], workers=1).boots
    return boots


def one_run(lab: LocalLab, name: str, conc: int, rnd: int, a: argparse.Namespace,
            tmp: Path) -> dict[str, Any]:
    comp = layout(name, a)
    times = a.times or 2 * conc
    stack = NovaStack(nova=NovaOptions(notifications_log=True), computes=comp)
    t_up = time.monotonic()
    tag = f"{name}-c{conc}-r{rnd}"
    with NovaDeployment(lab, lambda m: print(f"  [{tag}] {m}", flush=True), stack).up() as dep:
        up_s = time.monotonic() - t_up
        mem_up = dep.computes.memory_summary()
        flavor = dep.client(1).ensure_flavor(FLAVOR_NAME, vcpus=1, ram_mb=512, disk_gb=1)
        time.sleep(a.settle)  # start-up periodic tasks out of the window
        boots_path = tmp / tag / "boots-1.jsonl"
        boots_path.parent.mkdir(parents=True)
        job = juice_job(dep, flavor, 1, times, conc, {"tenants": 1, "users_per_tenant": 1}, boots_path)
        pids = dep.computes.pids()
        cpu0 = {p: cpu_s(p) for p in pids}
        lb, t0 = load(), time.time()
        res = run_drivers(lab, [job])[0]
        cpu = sum(cpu_s(p) - c for p, c in cpu0.items())
        la = load()
        time.sleep(1.0)  # the last notifications reach the compute logs
        mem_after = dep.computes.memory_summary()
        rss = [r for p in pids if (r := rss_mb(p)) is not None]
        notes = metrics.notifications(dep.computes.log_files(), since=t0 - 1)
        lines = metrics.read_boot_lines([boots_path]) if boots_path.exists() else []
        rows = metrics.boots(list(iteration_rows([res])), lines, notes)
        s = metrics.summarize(rows)
        ok = [r for r in rows if r["ok"]]
        tb = traced_boots(dep, tmp / tag / "logs")
        act = tb[tb["state"] == "active"]
        return {"layout": name, "concurrency": conc, "round": rnd, "times": times,
                "processes": len(comp.sites), "nodes_per_process": comp.nodes_per_process,
                "isolation": comp.isolation, "max_concurrent_builds": comp.max_concurrent_builds,
                "stack_up_s": round(up_s, 1), "driver_failure": res.failure, "boots": s["boots"],
                "success": s["active"], "traced_active": len(act),
                "nova_boot_s": quantiles([r["nova_boot_s"] for r in ok if r["nova_boot_s"] is not None]),
                "phase_mean_s": {ph: round(float(act[f"{ph}_s"].mean()), 4) if len(act) else None
                                 for ph in PHASES},
                "phase_values": {ph: [float(x) for x in act[f"{ph}_s"].dropna()] for ph in PHASES},
                "nodes_used": len(nodes_built_on(dep.computes.log_files(), t0 - 1)),
                "computes_rss_mb_total": round(sum(rss), 1), "memory_up": mem_up,
                "memory_after": mem_after, "computes_cpu_s_window": round(cpu, 2),
                "window_s": round(res.finished_at - res.started_at, 2),
                "load_before": lb, "load_after": la}


def phase_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per concurrency, layout and phase: the mean over every traced ACTIVE boot of the rounds,
    its 95 % interval (runs as clusters) and, against 1pp, the difference and its verdict."""
    from juice.report.findings import contrast, estimate

    out: list[dict[str, Any]] = []
    for conc in sorted({r["concurrency"] for r in rows}):
        def pooled(name: str, ph: str, conc: int = conc) -> tuple[list[float], list[str]]:
            vals: list[float] = []
            runs: list[str] = []
            for r in rows:
                if r["layout"] == name and r["concurrency"] == conc:
                    vals += r["phase_values"][ph]
                    runs += [f"{name}-{r['round']}"] * len(r["phase_values"][ph])
            return vals, runs

        for name in LAYOUTS:
            for ph in PHASES:
                v, c = pooled(name, ph)
                if not v:
                    continue
                e, _ = estimate(v, c, key=(conc, name, ph))
                row: dict[str, Any] = {"concurrency": conc, "layout": name, "phase": ph, "n": len(v),
                                       "mean_s": round(e.value, 4), "lo_s": round(e.lo, 4),
                                       "hi_s": round(e.hi, 4)}
                ref_v, ref_c = pooled("1pp", ph)
                if name != "1pp" and ref_v:
                    d = contrast(ref_v, v, ref_c, c, key=(conc, name, ph))
                    row.update(diff_s=round(d.diff.value, 4), diff_lo_s=round(d.diff.lo, 4),
                               diff_hi_s=round(d.diff.hi, 4), verdict=d.verdict)
                out.append(row)
    return out


def print_phases(table: list[dict[str, Any]]) -> None:
    by: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    for r in table:
        by.setdefault((r["concurrency"], r["layout"]), {})[r["phase"]] = r
    print("\nmean seconds per phase [95 % interval]; * = differs from 1pp (the difference's interval "
          "excludes 0)")
    print(f"{'conc':>4} {'layout':6} {'boots':>5} " + " ".join(f"{ph:>22}" for ph in PHASES))
    for (conc, name), ph in sorted(by.items(), key=lambda kv: (kv[0][0], LAYOUTS.index(kv[0][1]))):
        n = max((x["n"] for x in ph.values()), default=0)
        cells = []
        for p in PHASES:
            x = ph.get(p)
            cells.append(f"{x['mean_s']:.3f} [{x['lo_s']:.3f},{x['hi_s']:.3f}]"
                         + ("*" if x.get("verdict") == "real" else " ") if x else "-")
        print(f"{conc:>4} {name:6} {n:>5} " + " ".join(f"{c:>22}" for c in cells))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--nodes-per-process", type=int, default=0,
                    help="K for the Kpp and fork layouts (0: --nodes, all in one process)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[20, 60, 200])
    ap.add_argument("--times", type=int, default=0, help="boots per run (0: 2 x concurrency)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    ap.add_argument("--sites", type=int, default=3, help="computes spread over sites 2..N")
    ap.add_argument("--builds-per-node", type=int, default=0,
                    help="max_concurrent_builds per node of a nova service (0: nova's 10 per service)")
    ap.add_argument("--vcpus", type=int, default=32)
    ap.add_argument("--memory-mb", type=int, default=65536)
    ap.add_argument("--disk-gb", type=int, default=400)
    ap.add_argument("--settle", type=float, default=10.0, help="seconds between stack up and the boots")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    k = a.nodes_per_process or a.nodes
    if a.nodes % k:
        ap.error(f"--nodes-per-process: {k} does not divide --nodes {a.nodes}")
    most = max(a.times or 2 * c for c in a.concurrency)
    if most > a.nodes * min(a.vcpus, a.memory_mb // 512, a.disk_gb):
        ap.error(f"--times: {most} boots do not fit on {a.nodes} nodes (raise --vcpus/--memory-mb/--disk-gb)")
    return a


def main() -> None:
    a = parse_args()
    rows: list[dict[str, Any]] = []
    lab_spec = labspec.parse({"name": f"ndist{os.getpid() % 100000}", "sites": a.sites})
    print(f"load average at start: {load()}", flush=True)
    with LocalLab.up(lab_spec, ephemeral=True) as lab, \
            tempfile.TemporaryDirectory(prefix="juice-nd-") as tmpd:
        for rnd in range(a.rounds):
            for conc in a.concurrency:
                for name in a.layouts:
                    r = one_run(lab, name, conc, rnd, a, Path(tmpd))
                    rows.append(r)
                    print(json.dumps({k: v for k, v in r.items() if k != "phase_values"}), flush=True)
    table = phase_table(rows)
    doc = {"nodes": a.nodes, "nodes_per_process": a.nodes_per_process or a.nodes, "times": a.times,
           "concurrency": a.concurrency, "rounds": a.rounds, "layouts": a.layouts,
           "builds_per_node": a.builds_per_node, "sites": a.sites, "load_at_end": load(), "rows": rows,
           "phases": table}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_name(a.out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, a.out)
    print(f"\n{'layout':6} {'conc':>4} {'rnd':>3} {'procs x nodes':>13} {'mcb':>4} {'ok':>7} {'nova med':>8} "
          f"{'nova p95':>8} {'nodes':>5} {'RSS MB':>8} {'MB/node':>7} {'CPU s':>6} load before → after")
    for r in rows:
        mem = r["memory_after"] or {}
        print(f"{r['layout']:6} {r['concurrency']:>4} {r['round']:>3} "
              f"{r['processes']:>5} x {r['nodes_per_process']:<5} {r['max_concurrent_builds']:>4} "
              f"{r['success']:>3}/{r['boots']:<3} {r['nova_boot_s']['median']!s:>8} "
              f"{r['nova_boot_s']['p95']!s:>8} {r['nodes_used']:>5} {r['computes_rss_mb_total']:>8} "
              f"{mem.get('added_mb_per_node', '-')!s:>7} "
              f"{r['computes_cpu_s_window']:>6} {r['load_before']} → {r['load_after']}")
    print_phases(table)
    print(f"load average at end: {load()}\nwritten: {a.out}")


if __name__ == "__main__":
    main()
