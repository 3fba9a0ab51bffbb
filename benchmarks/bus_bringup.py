"""Bring-up of the message buses in a lab (not a test: it measures and prints).

    python benchmarks/bus_bringup.py [--sites 3] [--delay 10] [--repeat 1]

Per repetition, in a fresh ephemeral lab of ``--sites`` sites ``--delay`` ms one-way apart:
a RabbitMQ cluster of one node per site (start of the nodes in parallel, then each join in
turn, then a kill -9 of the last site's node and its rejoin), and NATS as one cluster spanning
the sites and as per-site clusters joined by gateways (time until every route/gateway is
settled). RSS per server from /proc. The load average is printed with each figure.
"""

from __future__ import annotations

import argparse
import os
import secrets
import time
from pathlib import Path

from juice.lab import LocalLab, spec
from juice.services.buses.nats import Nats
from juice.services.buses.rabbitmq import RabbitMQ


def rss_mb(pid: int | None) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=3)
    ap.add_argument("--delay", type=float, default=10.0, help="one-way delay between sites, ms")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    for rep in range(a.repeat):
        name = "bb" + secrets.token_hex(3)
        lab_spec = spec.parse({"name": name, "sites": a.sites, "delay_ms": a.delay})
        with LocalLab.up(lab_spec, ephemeral=True) as lab:
            print(f"[{rep}] load average before RabbitMQ: {load()}")
            mq = RabbitMQ(lab, nodes=list(lab.sites))
            t0 = time.monotonic()
            mq.up()
            up = time.monotonic() - t0
            joins = [v for k, v in mq.timings.items() if k.endswith(".join_s")]
            rss = [rss_mb(r.pid) for r in mq.records() if r.kind == "rabbitmq"]
            t1 = time.monotonic()
            mq.kill(a.sites)
            mq.restart(a.sites)
            back = time.monotonic() - t1
            mq.stop()
            started = mq.timings.get("start_s", float("nan"))
            print(f"[{rep}] rabbitmq {a.sites} nodes: up {up:.1f} s (nodes started in parallel "
                  f"{started:.1f} s, joins {', '.join(f'{j:.1f}' for j in joins)} s); kill -9 + rejoin "
                  f"{back:.1f} s; RSS {', '.join(f'{r:.0f}' for r in rss)} MB; load {load()}")
            for topo in ("cluster", "gateways"):
                nats = Nats(lab, sites=list(lab.sites), topology=topo)  # type: ignore[arg-type]
                t0 = time.monotonic()
                nats.up()
                up = time.monotonic() - t0
                rss = [rss_mb(r.pid) for r in nats.records()]
                nats.stop()
                print(f"[{rep}] nats {topo}: formed in {up:.2f} s; "
                      f"RSS {', '.join(f'{r:.1f}' for r in rss)} MB; load {load()}")


if __name__ == "__main__":
    main()
