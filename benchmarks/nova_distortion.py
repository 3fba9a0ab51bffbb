"""The distortion of many simulated nodes per nova-compute process: 1 node per process vs
all nodes in one process, same nodes, same boots.

    /var/cache/juice/venv/bin/python benchmarks/nova_distortion.py --nodes 20 --times 20 \
        --concurrency 10 --rounds 2

A real compute host is one nova-compute process per node. Juice's multi-node fake driver puts
N nodes in one process, and these N nodes then share what a process owns: one build limit
(``max_concurrent_builds``: a semaphore per process), one resource tracker and its claim lock
(``COMPUTE_RESOURCE_SEMAPHORE``: every claim, update and periodic task of every node of the
process serialises on it), one RPC connection and consumer (one ``compute.<host>`` queue), one
heartbeat (one service record: the N nodes are up or down together), one Python interpreter
(one GIL). This script measures what that changes for the same small experiment:

- layout ``1pp``: ``--nodes`` nova-compute processes × 1 node (``max_concurrent_builds`` =
  ``--builds-per-node``, i.e. per node what a real host would have);
- layout ``Npp``: 1 nova-compute process × ``--nodes`` nodes (``max_concurrent_builds`` =
  ``--nodes`` × ``--builds-per-node``: the SAME build slots per node-equivalent, so the limit
  itself is not what differs; ``--builds-per-node 0`` keeps nova's default 10 per process in
  both layouts instead, the study's default, to show the limit's effect too).

Every run gets a FRESH identical stack (one lab, ``--sites`` sites, 0 ms; MariaDB, RabbitMQ,
Keystone, placement, the fakes, nova-api, conductor, one scheduler in site 1; the computes
spread over sites 2..N) that differs only in the compute layout; the layouts alternate
(1pp, Npp, 1pp, Npp...) for ``--rounds`` rounds so drift on a shared host hits both. In each
run the nova study's ``NovaServers.boot_server`` (Juice's driver, ``--times`` × ``--concurrency``,
site 1) boots; each boot is timed as Rally does (``nova.boot_server``: POST, 1 s, a GET every
2 s until ACTIVE) and from nova's own notification (compute's ``instance.create.end`` minus the
POST's send time: no polling grid), as the study does (``juice.studies.nova.metrics``).

Reported per run and per layout (medians over rounds): successes, nova boot time and Rally-style
boot time (min/median/p90/p95/max), nova's build time (create.start → create.end), the
computes' RSS (sum and per process, after the run) and CPU during the window (sum of
user+system of the nova-compute processes), how many distinct nodes got a server, and the
load average. Writes benchmarks/results/nova_distortion.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nova_vs_rally import FLAVOR_NAME, QS, juice_job, load, quantiles

from juice.lab import LocalLab
from juice.lab import spec as labspec
from juice.load.drivers import run_drivers
from juice.load.iterations import iteration_rows
from juice.services.nova_conf import ComputeOptions, NovaOptions, spread
from juice.services.nova_deploy import NovaDeployment, NovaStack
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


def layout(name: str, a: argparse.Namespace) -> ComputeOptions:
    sites = range(2, a.sites + 1)
    if name == "1pp":
        procs, per = a.nodes, 1
    else:
        procs, per = 1, a.nodes
    builds = per * a.builds_per_node if a.builds_per_node else 10
    return ComputeOptions(sites=spread(procs, sites), nodes_per_process=per, vcpus=a.vcpus,
                          memory_mb=a.memory_mb, disk_gb=a.disk_gb, max_concurrent_builds=builds)


def one_run(lab: LocalLab, name: str, rnd: int, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    comp = layout(name, a)
    stack = NovaStack(nova=NovaOptions(notifications_log=True), computes=comp)
    t_up = time.monotonic()
    with NovaDeployment(lab, lambda m: print(f"  [{name} r{rnd}] {m}", flush=True), stack).up() as dep:
        up_s = time.monotonic() - t_up
        flavor = dep.client(1).ensure_flavor(FLAVOR_NAME, vcpus=1, ram_mb=512, disk_gb=1)
        time.sleep(a.settle)  # start-up periodic tasks out of the window
        boots_path = tmp / f"{name}-{rnd}" / "boots-1.jsonl"
        boots_path.parent.mkdir(parents=True)
        job = juice_job(dep, flavor, 1, a.times, a.concurrency, {"tenants": 1, "users_per_tenant": 1},
                        boots_path)
        pids = dep.computes.pids()
        cpu0 = {p: cpu_s(p) for p in pids}
        lb, t0 = load(), time.time()
        res = run_drivers(lab, [job])[0]
        cpu = sum(cpu_s(p) - c for p, c in cpu0.items())
        la = load()
        time.sleep(1.0)  # the last notifications reach the compute logs
        rss = [r for p in pids if (r := rss_mb(p)) is not None]
        notes = metrics.notifications(dep.computes.log_files(), since=t0 - 1)
        lines = metrics.read_boot_lines([boots_path]) if boots_path.exists() else []
        rows = metrics.boots(list(iteration_rows([res])), lines, notes)
        s = metrics.summarize(rows)
        builds = [n["end"] - n["start"] for n in notes.values() if "start" in n and "end" in n]
        ok = [r for r in rows if r["ok"]]
        return {"layout": name, "round": rnd, "processes": len(comp.sites),
                "nodes_per_process": comp.nodes_per_process,
                "max_concurrent_builds": comp.max_concurrent_builds, "stack_up_s": round(up_s, 1),
                "driver_failure": res.failure, "boots": s["boots"], "success": s["active"],
                "faults": s["faults"],
                "nova_boot_s": quantiles([r["nova_boot_s"] for r in ok if r["nova_boot_s"] is not None]),
                "rally_boot_s": quantiles([r["rally_boot_s"] for r in ok if r["rally_boot_s"] is not None]),
                "nova_build_s": quantiles(builds),
                "nodes_used": len(nodes_built_on(dep.computes.log_files(), t0 - 1)),
                "hosts_used": len({r["host"] for r in ok if r["host"]}),
                "computes_rss_mb_total": round(sum(rss), 1),
                "computes_rss_mb_per_process": round(statistics.median(rss), 1) if rss else None,
                "computes_cpu_s_window": round(cpu, 2),
                "window_s": round(res.finished_at - res.started_at, 2),
                "load_before": lb, "load_after": la}


def medians(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in ("1pp", "Npp"):
        rs = [r for r in rows if r["layout"] == name]
        if not rs:
            continue

        def med(xs: list[Any]) -> float | None:
            ys = [x for x in xs if x is not None]
            return round(statistics.median(ys), 3) if ys else None

        m: dict[str, Any] = {"success": med([r["success"] for r in rs]),
                             "boots": med([r["boots"] for r in rs])}
        for fig in ("nova_boot_s", "rally_boot_s", "nova_build_s"):
            m |= {f"{fig}_{k}": med([r[fig][k] for r in rs]) for k, _ in QS}
        for k in ("computes_rss_mb_total", "computes_rss_mb_per_process", "computes_cpu_s_window",
                  "window_s", "nodes_used"):
            m[k] = med([r[k] for r in rs])
        out[name] = m
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--times", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sites", type=int, default=3, help="computes spread over sites 2..N")
    ap.add_argument("--builds-per-node", type=int, default=1,
                    help="max_concurrent_builds per node-equivalent (0: nova's default 10 per process)")
    ap.add_argument("--vcpus", type=int, default=8)
    ap.add_argument("--memory-mb", type=int, default=16384)
    ap.add_argument("--disk-gb", type=int, default=200)
    ap.add_argument("--settle", type=float, default=10.0, help="seconds between stack up and the boots")
    ap.add_argument("--out", type=Path, default=OUT)
    return ap.parse_args(argv)


def main() -> None:
    a = parse_args()
    rows: list[dict[str, Any]] = []
    lab_spec = labspec.parse({"name": f"ndist{os.getpid() % 100000}", "sites": a.sites})
    print(f"load average at start: {load()}", flush=True)
    with LocalLab.up(lab_spec, ephemeral=True) as lab, \
            tempfile.TemporaryDirectory(prefix="juice-nd-") as tmpd:
        for rnd in range(a.rounds):
            for name in ("1pp", "Npp"):
                r = one_run(lab, name, rnd, a, Path(tmpd))
                rows.append(r)
                print(json.dumps(r), flush=True)
    doc = {"nodes": a.nodes, "times": a.times, "concurrency": a.concurrency, "rounds": a.rounds,
           "builds_per_node": a.builds_per_node, "sites": a.sites, "load_at_end": load(), "rows": rows,
           "medians": medians(rows)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    print(f"\n{'layout':6} {'rnd':>3} {'procs':>5} {'mcb':>4} {'ok':>7} {'nova med':>8} {'nova p95':>8} "
          f"{'rally med':>9} {'rally p95':>9} {'build med':>9} {'nodes':>5} {'RSS MB':>8} {'CPU s':>6} load")
    for r in rows:
        print(f"{r['layout']:6} {r['round']:>3} {r['processes']:>5} {r['max_concurrent_builds']:>4} "
              f"{r['success']:>3}/{r['boots']:<3} {r['nova_boot_s']['median']!s:>8} "
              f"{r['nova_boot_s']['p95']!s:>8} {r['rally_boot_s']['median']!s:>9} "
              f"{r['rally_boot_s']['p95']!s:>9} {r['nova_build_s']['median']!s:>9} {r['nodes_used']:>5} "
              f"{r['computes_rss_mb_total']:>8} {r['computes_cpu_s_window']:>6} "
              f"{r['load_before']} → {r['load_after']}")
    for name, m in doc["medians"].items():
        print(f"{name}: median over rounds: success {m['success']}/{m['boots']}, nova boot median "
              f"{m['nova_boot_s_median']} s p95 {m['nova_boot_s_p95']} s, Rally-style median "
              f"{m['rally_boot_s_median']} s, build {m['nova_build_s_median']} s, computes RSS "
              f"{m['computes_rss_mb_total']} MB, computes CPU {m['computes_cpu_s_window']} s")
    print(f"written: {a.out}")


if __name__ == "__main__":
    main()
