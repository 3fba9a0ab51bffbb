"""Bring-up time of each study's deployment: in a local lab vs on N SSH hosts, side by side.

    /var/cache/juice/venv/bin/python benchmarks/hosts_bringup.py      # --sites 3 --repeat 2
        # --only keystone,messaging,scheduler-db,nova --out benchmarks/results/hosts_bringup.json

For each study, the deployment its runs share, brought up with the SAME service modules in a
local lab of N sites (network namespaces) and on N SSH test hosts (``tests/testhosts.py``:
each its own root filesystem prepared by ``juice hosts prepare``, processes and sshd, in a site
namespace, reached through a loopback forwarder and Juice's host agent), alternating local /
hosts / hosts / local ... for ``--repeat`` R rounds; every deployment is stopped before the next starts:

- keystone: Galera with a node in every site (every node pre-seeded from one template datadir:
  copied where the places share this disk, sent as one tarball to the hosts; node 1
  bootstraps, the others join at once) and a Keystone (1 worker) + memcached per site (the
  quickstart's Galera deployment);
- messaging: a RabbitMQ cluster with a node in every site;
- scheduler-db: MariaDB in site 1;
- nova: MariaDB, RabbitMQ, Keystone, placement and the fake stand-ins in site 1, nova api +
  conductor + 1 scheduler in site 1, one nova-compute of 5 nodes in every other site, until
  every node is in placement (``NovaDeployment.up``).

Figures: wall seconds of ``up`` (to healthy) and of ``stop``, medians over R with min/max, the
hosts/local ratio, the 1-min load average before each bring-up. The hosts are namespaces of
this one 2-core machine: what differs is the path (ssh + agent requests, files shipped instead
of shared), not the hardware. Writes JSON; everything is removed on success, failure, Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT):  # juice, and tests.testhosts (the test hosts)
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from tests import testhosts  # noqa: E402

from juice.lab import spec as labspec  # noqa: E402
from juice.lab.local import uniform_lab  # noqa: E402
from juice.lab.place import Lab  # noqa: E402
from juice.lab.remote import RemoteLab  # noqa: E402

STUDIES = ("keystone", "messaging", "scheduler-db", "nova")


def _quiet(_: str) -> None:
    pass


def keystone(lab: Lab) -> list[Any]:
    from juice.services.databases.galera import Galera
    from juice.services.openstack.keystone import Keystone, KeystoneOptions

    db = Galera(lab, _quiet)
    db.up(timeout=600)
    ks = Keystone(lab, db, _quiet, KeystoneOptions(cache=True, password_hash_rounds=4, workers=1))
    try:
        ks.up(timeout=600)
    except BaseException:
        db.stop()
        raise
    return [ks, db]


def messaging(lab: Lab) -> list[Any]:
    from juice.services.buses.rabbitmq import RabbitMQ

    mq = RabbitMQ(lab, _quiet, nodes=list(lab.sites), cluster=True)
    mq.up(timeout=600)
    return [mq]


def scheduler_db(lab: Lab) -> list[Any]:
    from juice.services.databases.mariadb import MariaDBCentral

    db = MariaDBCentral(lab, _quiet, site=1)
    db.up(timeout=300)
    return [db]


def nova(lab: Lab) -> list[Any]:
    from juice.services.openstack.nova_conf import ComputeOptions
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack

    computes = ComputeOptions(sites=tuple(s for s in lab.sites if s != 1) or (1,), nodes_per_process=5)
    return [NovaDeployment(lab, _quiet, NovaStack(computes=computes)).up(timeout=1200)]


BRING_UP: dict[str, Callable[[Lab], list[Any]]] = {
    "keystone": keystone, "messaging": messaging, "scheduler-db": scheduler_db, "nova": nova}


@contextmanager
def local_lab(sites: int, tmp: Path) -> Iterator[Lab]:
    with uniform_lab("bup", sites, 0.0) as lab:
        yield lab


@contextmanager
def hosts_lab(sites: int, tmp: Path) -> Iterator[Lab]:
    with testhosts.test_hosts(sites, tmp / "hosts", prepared=True) as (_lab, hosts), \
            RemoteLab.up(labspec.parse({"name": "bupr", "sites": sites, "delay_ms": 0}), hosts) as remote:
        yield remote


def measure(study: str, where: str, sites: int, tmp: Path) -> dict[str, Any]:
    opener: Callable[[int, Path], AbstractContextManager[Lab]] = local_lab if where == "local" else hosts_lab
    with opener(sites, tmp) as lab:
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        started = BRING_UP[study](lab)
        up_s = time.monotonic() - t0
        t1 = time.monotonic()
        for svc in started:
            svc.stop()
        stop_s = time.monotonic() - t1
    return {"study": study, "where": where, "up_s": round(up_s, 2), "stop_s": round(stop_s, 2),
            "load_1min": round(load, 2)}


def summary(rows: list[dict[str, Any]], studies: list[str]) -> list[str]:
    out = ["| study | local up s (median, min–max) | hosts up s (median, min–max) | hosts / local | "
           "local stop s | hosts stop s | load avg |", "|---|---:|---:|---:|---:|---:|---:|"]
    for st in studies:
        by = {w: [r for r in rows if r["study"] == st and r["where"] == w] for w in ("local", "hosts")}
        if not by["local"] or not by["hosts"]:
            continue
        med = {w: statistics.median(r["up_s"] for r in by[w]) for w in by}
        rng = {w: f"{min(r['up_s'] for r in by[w]):.1f}–{max(r['up_s'] for r in by[w]):.1f}" for w in by}
        stop = {w: statistics.median(r["stop_s"] for r in by[w]) for w in by}
        loads = [r["load_1min"] for w in by for r in by[w]]
        out.append(f"| {st} | {med['local']:.1f} ({rng['local']}) | {med['hosts']:.1f} ({rng['hosts']}) | "
                   f"{med['hosts'] / med['local']:.2f} | {stop['local']:.1f} | {stop['hosts']:.1f} | "
                   f"{min(loads):.1f}–{max(loads):.1f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", type=int, default=3, help="sites = hosts (2..9)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds (local and hosts once each per round)")
    ap.add_argument("--only", default=",".join(STUDIES), help="studies, comma-separated")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hosts_bringup.json")
    a = ap.parse_args(argv)
    studies = [s for s in a.only.split(",") if s]
    bad = [s for s in studies if s not in BRING_UP]
    if bad or not 2 <= a.sites <= 9 or not 1 <= a.repeat <= 20:
        print(f"error: --only {bad or ''} (choose from {', '.join(STUDIES)}), --sites 2..9, --repeat 1..20",
              file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="juice-bench-bringup-") as tmp:
        for r in range(a.repeat):
            order = ("local", "hosts") if r % 2 == 0 else ("hosts", "local")
            for st in studies:
                for where in order:
                    row = measure(st, where, a.sites, Path(tmp))
                    rows.append({**row, "round": r})
                    print(f"round {r + 1}/{a.repeat} {st:13s} {where:6s} up {row['up_s']:7.1f} s  "
                          f"stop {row['stop_s']:5.1f} s  load {row['load_1min']:.2f}", flush=True)
    table = summary(rows, studies)
    print("\n" + "\n".join(table))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"sites": a.sites, "repeat": a.repeat, "rows": rows, "table": table,
                                 "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d %H:%M")}, indent=1))
    print(f"\n→ {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
