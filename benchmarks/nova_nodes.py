"""Registration of simulated compute nodes (not a test: it measures and prints).

    python benchmarks/nova_nodes.py [--nodes 1000] [--processes 4] [--compute-sites 2] [--settle 70]
                                    [--network ovn|fake-neutron] [--image glance|fake-glance] [--boots 10]

In a fresh ephemeral lab (site 1: MariaDB, RabbitMQ, Keystone, placement, the real glance-api
and neutron-server with ML2/OVN and ovn-central (the defaults; ``--network fake-neutron`` /
``--image fake-glance`` for the stand-ins), nova-api, conductor, one scheduler; sites 2..: the
nova-compute processes, round-robin), ``--processes`` nova-compute processes serve ``--nodes``
fake nodes in all (Juice's multi-node fake driver; each process also plays its nodes'
ovn-controller, simulated: one chassis per node in OVN's southbound DB).
Reported: time from the computes' start to their services up, ``discover_hosts --by-service``,
and every node in placement; RSS per process right after registration and after ``--settle``
seconds (one periodic resource update runs every 60 s); CPU seconds per process, and of every
process in the lab by kind (placement workers, conductor, mariadbd, ...) at registration and
over the settle window: which server the registration waits for; RSS per node
(total / nodes) and the marginal RSS per node against a baseline process serving one node;
the load average (1/5/15 min) before, at registration and at the end. With the real neutron:
its agents (one "OVN Controller agent" per chassis) and, with ``--boots N``, N servers booted at
once through the API with a port on the tenant network each: ACTIVE, their ports bound to the
node that built them (the nodes are schedulable through the real network service), the time.
RSS by process kind (what the real services cost beside the nodes). Results appended as a JSON
line to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from juice.lab import LocalLab, spec
from juice.services.openstack.nova_compute import NovaComputes
from juice.services.openstack.nova_conf import ComputeOptions, Computes
from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
from juice.services.process import rss

MB = 1024 * 1024


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def label(pid: int) -> str:
    """A process's kind from its command line (gunicorn workers by their app name)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    first = argv[0]
    if first.startswith(("gunicorn:", "nova-")) and " " in first:
        head, _, rest = first.partition(" [")
        return head + (f" [{rest}" if rest and len(rest) < 30 else "")  # gunicorn's [app], not argv
    for a in argv[:3]:
        base = os.path.basename(a)
        if base.startswith(("nova-", "juice-nova", "placement", "keystone", "mariadbd", "beam", "memcached",
                            "ovsdb-server", "ovn-northd", "neutron", "glance")):
            return base
    return os.path.basename(first) or "?"


def lab_cpu(lab: LocalLab) -> dict[str, float]:
    """CPU seconds so far of every process in the lab's sites, summed by kind."""
    from juice.lab import netns

    out: dict[str, float] = {}
    for k in lab.sites:
        for pid in netns.pids(lab.site_ns(k)):
            c = cpu_s(pid)
            if c == c:  # not NaN
                out[label(pid)] = round(out.get(label(pid), 0.0) + c, 1)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def lab_rss(lab: LocalLab) -> dict[str, float]:
    """RSS (MB) of every process in the lab's sites, summed by kind."""
    from juice.lab import netns

    out: dict[str, float] = {}
    for k in lab.sites:
        for pid, b in rss(lab.place(k), netns.pids(lab.site_ns(k))).items():
            out[label(pid)] = round(out.get(label(pid), 0.0) + b / MB, 1)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def boot_check(dep: NovaDeployment, n: int, say: Callable[[str], None]) -> dict[str, Any]:
    """n servers at once, each with a port on the tenant network: ACTIVE, each port bound to the
    node's nova-compute service host (its chassis); the time from the first POST to the last ACTIVE."""
    cli = dep.client(1)
    flavor = cli.ensure_flavor("juice-bench", vcpus=1, ram_mb=256, disk_gb=1)
    t0 = time.monotonic()
    ids = [cli.boot(f"juice-bench-{i}", flavor, dep.image_id, network=dep.network_id) for i in range(n)]
    active, bound, hosts = 0, 0, set()
    try:
        for sid in ids:
            srv = cli.wait_status(sid, "ACTIVE", timeout=600)
            active += 1
            hosts.add(srv["OS-EXT-SRV-ATTR:hypervisor_hostname"])
            if dep.neutron is not None:  # bound to the nova-compute service's host (its chassis)
                ports = dep.neutron.api("GET", f"/v2.0/ports?device_id={sid}")["ports"]
                svc = srv["OS-EXT-SRV-ATTR:host"]
                bound += sum(p.get("binding:host_id") == svc and p["status"] == "ACTIVE" for p in ports)
        took = time.monotonic() - t0
        say(f"{active}/{n} ACTIVE in {took:.1f} s on {len(hosts)} nodes; {bound} ports bound to their node")
    finally:
        for sid in ids:
            cli.delete(sid)
        for sid in ids:
            cli.wait_gone(sid, timeout=300)
    return {"boots": n, "active": active, "ports_bound_to_their_node": bound, "nodes_used": len(hosts),
            "seconds": round(took, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--compute-sites", type=int, default=2)
    ap.add_argument("--delay", type=float, default=0.0, help="one-way delay between sites, ms")
    ap.add_argument("--settle", type=float, default=70.0, help="seconds to watch after registration")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--network", choices=["ovn", "fake-neutron"], default="ovn")
    ap.add_argument("--image", choices=["glance", "fake-glance"], default="glance")
    ap.add_argument("--boots", type=int, default=0, help="servers booted at once after registration")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "nova_nodes.jsonl")
    a = ap.parse_args()
    if a.nodes % a.processes:
        ap.error("--nodes must be a multiple of --processes")
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"{time.monotonic() - t0:7.1f} s  {msg}", flush=True)

    name = "nb" + secrets.token_hex(3)
    sites = 1 + a.compute_sites
    comp = ComputeOptions(Computes(processes=a.processes, sites=list(range(2, sites + 1)),
                                   nodes_per_process=a.nodes // a.processes))
    before = load()
    with LocalLab.up(spec.parse({"name": name, "sites": sites, "delay_ms": a.delay}), ephemeral=True) as lab:
        dep = NovaDeployment(lab, say, NovaStack(computes=comp, network_service=a.network,
                                                 image_service=a.image))
        base: NovaComputes | None = None
        try:
            dep.up(timeout=a.timeout)
            at_reg = load()
            cpu_reg = lab_cpu(lab)
            top = list(cpu_reg.items())[:8]
            say("CPU s so far by process kind: " + ", ".join(f"{k} {v}" for k, v in top))
            rss_kind = lab_rss(lab)
            say("RSS MB by process kind: " + ", ".join(f"{k} {v}" for k, v in list(rss_kind.items())[:10]))
            agents: dict[str, int] = {}
            if dep.neutron is not None:
                for ag in dep.neutron.agents():
                    key = f"{ag['agent_type']} ({'alive' if ag['alive'] else 'dead'})"
                    agents[key] = agents.get(key, 0) + 1
                say(f"neutron agents: {agents}")
            pids = {h: s.pid for h, s in dep.computes.servers.items() if s.pid}
            rss_reg = dep.computes.rss()
            base = NovaComputes(lab, dep.nova, say, ComputeOptions(
                Computes(processes=1, sites=[2], nodes_per_process=1), first_index=a.processes + 1))
            base.up(timeout=600)
            say(f"watching {a.settle:.0f} s (periodic resource updates)")
            peak = dict(rss_reg)
            end = time.monotonic() + a.settle
            while time.monotonic() < end:
                for h, v in dep.computes.rss().items():
                    peak[h] = max(peak.get(h, 0), v)
                time.sleep(2)
            base_rss = max(base.rss().values())
            # after the settle window: every node's inventory reported (a boot right after the
            # nodes appear in placement can find none with its inventory yet)
            boots = None
            if a.boots:
                before_boots = lab_cpu(lab)
                boots = boot_check(dep, a.boots, say)
                spent = {k: round(v - before_boots.get(k, 0.0), 1) for k, v in lab_cpu(lab).items()}
                boots["cpu_s_by_kind"] = dict(sorted(((k, v) for k, v in spent.items() if v >= 0.1),
                                                     key=lambda kv: -kv[1]))
                say("CPU s by process kind during the boots: " + ", ".join(
                    f"{k} {v}" for k, v in list(boots["cpu_s_by_kind"].items())[:10]))
            cpu = {h: round(cpu_s(p), 1) for h, p in pids.items()}
            cpu_end = lab_cpu(lab)
            cpu_settle = {k: round(v - cpu_reg.get(k, 0.0), 1) for k, v in cpu_end.items()}
            after = load()
            t = dep.computes.timings
            total = sum(peak.values())
            per_proc_nodes = comp.nodes_per_process
            result = {
                "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "nodes": a.nodes, "processes": a.processes,
                "nodes_per_process": per_proc_nodes, "compute_sites": a.compute_sites, "delay_ms": a.delay,
                "stack_up_s": dep.timings.get("up_s"), "services_up_s": round(t["services_up_s"], 1),
                "discover_s": round(t["discover_s"], 1), "registered_s": round(t["registered_s"], 1),
                "rss_mb_at_registration": {h: round(v / MB, 1) for h, v in rss_reg.items()},
                "rss_mb_peak": {h: round(v / MB, 1) for h, v in peak.items()},
                "rss_mb_baseline_1_node": round(base_rss / MB, 1),
                "rss_kb_per_node_total": round(total / a.nodes / 1024, 1),
                "rss_kb_per_node_marginal": round((total - a.processes * base_rss) / a.nodes / 1024, 1),
                "network_service": a.network, "image_service": a.image, "neutron_agents": agents,
                "boot_check": boots, "rss_mb_by_kind_at_registration": rss_kind,
                "cpu_s": cpu, "cpu_s_by_kind_at_registration": cpu_reg,
                "cpu_s_by_kind_while_settling": cpu_settle, "loadavg_before": before,
                "loadavg_at_registration": at_reg,
                "loadavg_end": after, "cores": os.cpu_count(),
            }
        finally:
            if base is not None:
                base.stop()
            dep.stop()
    print(json.dumps(result, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(result) + "\n")
    say(f"appended to {a.out}")


if __name__ == "__main__":
    main()
