"""Juice's nova driver vs real Rally (rally-openstack 4.1.0), NovaServers.boot_server, against the
SAME nova deployment.

    /var/cache/juice/venv/bin/python benchmarks/nova_vs_rally.py --rounds 3 --times 20 --concurrency 5

One ephemeral lab (``--sites``, 0 ms), one NovaDeployment in it (the nova study's stack:
MariaDB, RabbitMQ, Keystone, placement, fake-glance/fake-neutron stand-ins, nova-api,
conductor, a scheduler; ``--processes`` nova-compute processes × ``--nodes-per-process``
simulated nodes in sites 2..N). Then, alternating for ``--rounds`` rounds (Rally, Juice, Rally,
Juice...), the same scenario at the same times × concurrency with the same ``users`` context:

- Rally: ``rally task start`` (task format v2, ``NovaServers.boot_server`` with
  ``image: {name: juice-fake-image}``, ``flavor: {name: juice-small}``; the env spec as
  ``rally_compare.py``'s), in Rally's own venv, INSIDE the driver site's namespace (``ip netns
  exec``). Its figures come from ``rally task report --json`` (format 1.2). Rally boots at
  novaclient's default microversion with no network asked for: rally-openstack 4.1.0 cannot
  send ``networks: none`` (``nics: "none"`` crashes its ``_boot_server``, and novaclient
  requires nics from 2.37 on; see the study scenario's ``network: omit``).
- Juice: the nova study's scenario through ``juice.load.drivers.run_drivers`` (one driver
  process in the same site, the env ``NovaStudy.run_point`` builds); by default
  (``--juice-networks omit``) sending the SAME requests as Rally (the study scenario's ``network: omit``: no
  ``networks``, microversion 2.1); ``--juice-networks none`` runs the study's own request
  (``networks: none`` at 2.37: nova-api skips the network look-ups). Its figures come from the
  rally.json Juice writes (``juice.load.rally_json.write_rally``).

Per run: successes, the ``nova.boot_server`` atomic (min/median/p90/p95/max over successful
iterations), nova's own build time of the same servers (compute's ``instance.create.start`` →
``instance.create.end`` notifications in the window: the server side, which a heavier client
may slow down on a shared host), client CPU per iteration (Rally: RUSAGE_CHILDREN of its whole
process tree, validation/contexts/cleanup included; Juice: the same whole-tree figure AND the
driver's own window ``cpu_s``) and the load average before and after. Between runs the
script waits until no server is left (both tools delete theirs in cleanup), so every run
starts from the same state.

Prints one JSON line per run and a table with per-tool medians; writes everything to
benchmarks/results/nova_vs_rally.json (``--out``) and keeps Rally's report of each round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rally_compare import children_cpu, write_env_spec  # benchmarks/: the Keystone comparison's helpers

from juice.lab import LocalLab
from juice.lab import spec as labspec
from juice.load.drivers import DriverJob, run_drivers
from juice.load.rally_json import write_rally
from juice.load.runner import RunnerSpec
from juice.services.openstack.fake_openstack import IMAGE_ID
from juice.services.openstack.nova_conf import ComputeOptions, NovaOptions, spread
from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
from juice.studies.nova import metrics

RALLY = Path(os.environ.get("JUICE_CACHE", "/var/cache/juice")) / "rally" / "bin" / "rally"
HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "nova_vs_rally.json"
SCENARIO = "NovaServers.boot_server"
FLAVOR_NAME = "juice-small"   # 1 vCPU, 512 MB, 1 GB (the image is 1 GiB: Rally's image_valid_on_flavor)
IMAGE_NAME = "juice-fake-image"   # fake-glance's one image (juice.services.openstack.fake_openstack.image)
QS = (("min", 0.0), ("median", 0.5), ("p90", 0.9), ("p95", 0.95), ("max", 1.0))


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def quantiles(xs: Sequence[float]) -> dict[str, float | None]:
    a = np.asarray(list(xs), dtype=float)
    return {k: (round(float(np.quantile(a, q)), 3) if len(a) else None) for k, q in QS}


def boot_atomics(data: list[dict[str, Any]]) -> list[float]:
    """``nova.boot_server`` durations of the successful iterations (Rally JSON 1.2 data)."""
    out = []
    for it in data:
        if it.get("error"):
            continue
        for a in it.get("atomic_actions", []):
            if a["name"] == "nova.boot_server" and not a.get("failed"):
                out.append(a["finished_at"] - a["started_at"])
    return out


def workload_data(report: dict[str, Any]) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = report["tasks"][0]["subtasks"][0]["workloads"][0]["data"]
    return data


def build_times(dep: NovaDeployment, since: float, until: float) -> list[float]:
    """nova's own build time (compute's create.start → create.end) of servers built in the window."""
    notes = metrics.notifications(dep.computes.log_files(), since=since)
    return [n["end"] - n["start"] for n in notes.values()
            if "start" in n and "end" in n and n["end"] <= until]


def wait_no_servers(dep: NovaDeployment, timeout_s: float = 300.0) -> int:
    """Wait (bounded) until no server exists in any project; the number left."""
    cli = dep.client(1)
    deadline = time.monotonic() + timeout_s
    while True:
        left = len(cli.call("GET", "/servers?all_tenants=1").json()["servers"])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(2.0)


def row(tool: str, rnd: int, data: list[dict[str, Any]], cpu_tree_s: float, wall_s: float,
        builds: list[float], load_before: str, load_after: str, **extra: Any) -> dict[str, Any]:
    n = len(data)
    ok = sum(1 for d in data if not d.get("error"))
    boot = quantiles(boot_atomics(data))
    errors = sorted({str(d["error"][1])[:160] for d in data if d.get("error") and len(d["error"]) > 1})
    return {"tool": tool, "round": rnd, "iterations": n, "success": ok, "failed": n - ok,
            "boot_s": boot, "nova_build_s": quantiles(builds), "builds_seen": len(builds),
            "client_cpu_tree_s": round(cpu_tree_s, 3),
            "cpu_tree_ms_per_iteration": round(1000 * cpu_tree_s / max(1, n), 1),
            "wall_s": round(wall_s, 2), "load_before": load_before, "load_after": load_after,
            "errors": errors[:5], **extra}


# ---- Rally -----------------------------------------------------------------------------

class RallyHome:
    """A throwaway Rally (sqlite DB) with one env: the deployment's Keystone (its admin)."""

    def __init__(self, lab: LocalLab, dep: NovaDeployment, site: int, tmp: Path, keep: Path) -> None:
        self.lab, self.site, self.tmp, self.keep = lab, site, tmp, keep
        self.conf = tmp / "rally.conf"
        self.conf.write_text(f"[database]\nconnection = sqlite:///{tmp}/rally.sqlite\n")
        self.env = {**os.environ, "HOME": str(tmp)}
        self.rally(["db", "create"])
        path = write_env_spec(dep.ks, site, dep.ks.ks_sites[0], tmp / "env.json")
        self.rally(["env", "create", "--name", "juice", "--spec", str(path)])

    def rally(self, args: list[str], timeout: float = 3600,
              check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["ip", "netns", "exec", self.lab.site_ns(self.site), str(RALLY), "--config-file",
                str(self.conf), *args]
        cp = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if cp.returncode != 0 and check:
            raise SystemExit(f"rally {' '.join(args)} failed: {(cp.stderr or cp.stdout)[-1500:]}")
        return cp

    def run(self, rnd: int, times: int, concurrency: int,
            users: dict[str, int]) -> tuple[list[dict[str, Any]], float, float, float]:
        task = {"version": 2, "title": f"juice nova_vs_rally round {rnd}", "subtasks": [{
            "title": SCENARIO,
            "scenario": {SCENARIO: {"image": {"name": IMAGE_NAME}, "flavor": {"name": FLAVOR_NAME}}},
            "runner": {"constant": {"times": times, "concurrency": concurrency}},
            "contexts": {"users": users}}]}
        tf = self.tmp / f"task-{secrets.token_hex(3)}.json"
        tf.write_text(json.dumps(task))
        cpu0, t0, e0 = children_cpu(), time.monotonic(), time.time()
        cp = self.rally(["task", "start", str(tf)], check=False)  # exit 1 when an iteration failed
        wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
        found = re.search(r"Task\s+([0-9a-f-]{36})", cp.stdout)
        if not found:
            raise SystemExit(f"no task uuid in rally's output: {(cp.stderr or cp.stdout)[-1500:]}")
        out = self.tmp / "report.json"
        self.rally(["task", "report", found.group(1), "--json", "--out", str(out)])
        self.keep.mkdir(parents=True, exist_ok=True)
        (self.keep / f"rally-boot_server-round{rnd}.json").write_text(out.read_text())
        return workload_data(json.loads(out.read_text())), cpu, wall, e0


# ---- Juice -----------------------------------------------------------------------------

def juice_job(dep: NovaDeployment, flavor_id: str, site: int, times: int, concurrency: int,
              users: dict[str, int], boots_path: Path, networks: str = "none",
              poll_interval_s: float = 2.0) -> DriverJob:
    """The driver job ``NovaStudy.run_point`` builds (same env keys, same users context)."""
    ks = dep.ks
    creds = ks.admin_credentials()
    env = {"auth_url": ks.auth_url(site), "username": creds.username, "password": creds.password,
           "project_name": creds.project_name, "nova_url": dep.nova.api_url(),
           "image_id": IMAGE_ID, "flavor_id": flavor_id, "concurrency": concurrency,
           "boots_path": str(boots_path), "name_run": secrets.token_hex(3),
           "poll_interval_s": poll_interval_s, "boot_timeout_s": 300.0, "network": networks}
    runner = RunnerSpec(times=times, concurrency=concurrency)
    return DriverJob(site=site, scenario=SCENARIO, runner=runner, env=env, contexts={"users": users},
                     timeout_s=3600.0)


def juice_run(lab: LocalLab, dep: NovaDeployment, flavor_id: str, site: int, rnd: int, times: int,
              concurrency: int, users: dict[str, int], tmp: Path, keep: Path,
              networks: str) -> tuple[list[dict[str, Any]], float, float, float, float]:
    job = juice_job(dep, flavor_id, site, times, concurrency, users, tmp / f"boots-{site}.jsonl", networks)
    cpu0, t0, e0 = children_cpu(), time.monotonic(), time.time()
    res = run_drivers(lab, [job])[0]
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if res.failure:
        raise SystemExit(f"juice driver failed: {res.failure}")
    keep.mkdir(parents=True, exist_ok=True)
    path = keep / f"juice-boot_server-round{rnd}.json"
    write_rally(path, [res], title=f"nova_vs_rally round {rnd}", tags=["juice"])
    return workload_data(json.loads(path.read_text())), cpu, wall, e0, res.cpu_s


# ---- main ------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--times", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=5)
    ap.add_argument("--sites", type=int, default=2)
    ap.add_argument("--processes", type=int, default=2, help="nova-compute processes (sites 2..N)")
    ap.add_argument("--nodes-per-process", type=int, default=25)
    ap.add_argument("--driver-site", type=int, default=1)
    ap.add_argument("--tenants", type=int, default=1)
    ap.add_argument("--users-per-tenant", type=int, default=1)
    ap.add_argument("--juice-networks", choices=("omit", "none"), default="omit",
                    help="omit: Rally's request (no networks, microversion 2.1); none: the study's (2.37)")
    ap.add_argument("--out", type=Path, default=OUT)
    return ap.parse_args(argv)


def main() -> None:
    a = parse_args()
    if not RALLY.exists():
        raise SystemExit(f"Rally is not installed at {RALLY}")
    users = {"tenants": a.tenants, "users_per_tenant": a.users_per_tenant}
    # the stand-in image service (Rally finds fake-glance's image by IMAGE_NAME; the drivers are
    # compared, not the image service), as when benchmarks/nova.md's figures were measured
    stack = NovaStack(nova=NovaOptions(notifications_log=True), image_service="fake-glance",
                      computes=ComputeOptions(sites=spread(a.processes, range(2, a.sites + 1)),
                                              nodes_per_process=a.nodes_per_process))
    keep = a.out.parent / "nova_vs_rally"
    rows: list[dict[str, Any]] = []
    lab_spec = labspec.parse({"name": f"nvr{os.getpid() % 100000}", "sites": a.sites})
    print(f"load average at start: {load()}", flush=True)
    with LocalLab.up(lab_spec, ephemeral=True) as lab, \
            tempfile.TemporaryDirectory(prefix="juice-nvr-") as tmpd, \
            NovaDeployment(lab, lambda m: print(f"  {m}", flush=True), stack).up() as dep:
        tmp = Path(tmpd)
        flavor_id = dep.client(1).ensure_flavor(FLAVOR_NAME, vcpus=1, ram_mb=512, disk_gb=1)
        rally = RallyHome(lab, dep, a.driver_site, tmp, keep)
        for rnd in range(a.rounds):
            for tool in ("rally", "juice"):
                left = wait_no_servers(dep)
                lb = load()
                extra: dict[str, Any] = {"servers_before": left}
                if tool == "rally":
                    data, cpu, wall, e0 = rally.run(rnd, a.times, a.concurrency, users)
                else:
                    data, cpu, wall, e0, drv_cpu = juice_run(lab, dep, flavor_id, a.driver_site, rnd,
                                                            a.times, a.concurrency, users, tmp, keep,
                                                            a.juice_networks)
                    per_it = round(1000 * drv_cpu / max(1, len(data)), 1)
                    extra |= {"driver_window_cpu_s": round(drv_cpu, 3),
                              "driver_window_cpu_ms_per_iteration": per_it}
                time.sleep(1.0)  # the last notifications reach the compute logs
                r = row(tool, rnd, data, cpu, wall, build_times(dep, e0, time.time()), lb, load(), **extra)
                rows.append(r)
                print(json.dumps(r), flush=True)
        facts = dep.facts()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"scenario": SCENARIO, "juice_networks": a.juice_networks, "times": a.times,
           "concurrency": a.concurrency, "rounds": a.rounds,
           "users": users, "sites": a.sites, "processes": a.processes,
           "nodes_per_process": a.nodes_per_process, "driver_site": a.driver_site, "deployment": facts,
           "load_at_end": load(), "rows": rows, "medians": medians(rows)}
    a.out.write_text(json.dumps(doc, indent=1))
    print_table(rows, doc["medians"])
    print(f"written: {a.out} (Rally's and Juice's reports in {keep})")


def _med(rs: list[dict[str, Any]], get: Any) -> float | None:
    xs = [x for r in rs if (x := get(r)) is not None]
    return round(statistics.median(xs), 3) if xs else None


def medians(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool in ("rally", "juice"):
        rs = [r for r in rows if r["tool"] == tool]
        if not rs:
            continue

        def med(get: Any, rs: list[dict[str, Any]] = rs) -> float | None:
            return _med(rs, get)

        out[tool] = {"success": med(lambda r: r["success"]), "iterations": med(lambda r: r["iterations"]),
                     **{f"boot_{k}_s": med(lambda r, k=k: r["boot_s"][k]) for k, _ in QS},
                     "nova_build_median_s": med(lambda r: r["nova_build_s"]["median"]),
                     "cpu_tree_ms_per_iteration": med(lambda r: r["cpu_tree_ms_per_iteration"]),
                     "driver_window_cpu_ms_per_iteration": med(
                         lambda r: r.get("driver_window_cpu_ms_per_iteration"))}
    return out


def print_table(rows: list[dict[str, Any]], meds: dict[str, dict[str, Any]]) -> None:
    head = (f"{'tool':6} {'rnd':>3} {'ok':>7} {'min':>6} {'median':>6} {'p90':>6} {'p95':>6} {'max':>6} "
            f"{'build':>6} {'CPU ms/it':>9} {'drv ms/it':>9} {'load before → after':>22}")
    print("\nnova.boot_server (s); build = nova's create.start→end median (s); CPU = whole process tree")
    print(head)
    for r in rows:
        b = r["boot_s"]
        print(f"{r['tool']:6} {r['round']:>3} {r['success']:>3}/{r['iterations']:<3} "
              + " ".join(f"{b[k]!s:>6}" for k, _ in QS)
              + f" {r['nova_build_s']['median']!s:>6} {r['cpu_tree_ms_per_iteration']:>9} "
              f"{r.get('driver_window_cpu_ms_per_iteration', '-')!s:>9} "
              f"{r['load_before']:>10} → {r['load_after']}")
    for tool, m in meds.items():
        print(f"{tool:6} med {m['success']!s:>7} " + " ".join(f"{m[f'boot_{k}_s']!s:>6}" for k, _ in QS)
              + f" {m['nova_build_median_s']!s:>6} {m['cpu_tree_ms_per_iteration']!s:>9} "
              f"{m['driver_window_cpu_ms_per_iteration']!s:>9}")
    if "rally" in meds and "juice" in meds and meds["rally"]["cpu_tree_ms_per_iteration"]:
        ratio = (meds["juice"]["cpu_tree_ms_per_iteration"] or 0) / meds["rally"]["cpu_tree_ms_per_iteration"]
        print(f"Juice uses {ratio:.2f}× Rally's client CPU per iteration (whole process trees)")


if __name__ == "__main__":
    main()
