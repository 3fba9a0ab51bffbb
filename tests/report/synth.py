"""Stored results of the nova and messaging studies made up with a known shape (no server
started): what the report tests render. The summaries are computed by the studies' own
``metrics.summarize`` from per-boot / per-message rows drawn here.

    nova_results(tmp / "nova", slope=0.05, sched_effect=0.0)    # boot time = 3 + slope × conc.
    messaging_results(tmp / "msg", local={"rabbitmq×3": 0.33})  # share of local deliveries per bus
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice.studies.messaging import metrics as msg_metrics
from juice.studies.nova import metrics as nova_metrics

NOVA_FIXED = {"study": "nova-synth", "workload": "nova", "scenario": "NovaServers.boot_server", "sites": 2,
              "delay_ms": 0.0, "db": "mariadb", "host_subset_size": 1, "concurrency_backend": "threading",
              "max_pool_size": 10, "times": 40, "seed": 1, "nodes": 100, "compute_processes": 4}


def _write(d: Path, manifest: Mapping[str, Any], summary: Mapping[str, Any]) -> None:
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "summary.json").write_text(json.dumps(summary))


def nova_results(root: Path, slope: float = 0.05, sched_effect: float = 0.0,
                 concurrency: tuple[int, ...] = (5, 10, 20, 60), schedulers: tuple[int, ...] = (1, 4),
                 preload: tuple[int, ...] = (0, 500, 1000), per_vm: float = 0.002, reps: int = 2) -> Path:
    """Nova runs: boot time ≈ 3 + ``slope`` × concurrency + ``sched_effect`` × (schedulers − 1)
    + ``per_vm`` × VMs running; a tenth of the boots fail at the largest concurrency."""
    rng = np.random.default_rng(7)
    points = [(c, s, 0) for c in concurrency for s in schedulers]
    points += [(10, schedulers[0], p) for p in preload if p]
    for c, s, p in points:
        for rep in range(reps):
            mean = 3 + slope * c + sched_effect * (s - 1) + per_vm * p
            rows = []
            for i in range(40):
                fail = c == max(concurrency) and i % 10 == 0
                t = float(rng.normal(mean, 0.3))
                fault = "No valid host was found. There are not enough hosts available." if fail else None
                rows.append({"driver": 1, "index": i, "id": f"vm{i}", "name": f"s{i}",
                             "status": "ERROR" if fail else "ACTIVE", "ok": not fail,
                             "rally_boot_s": None if fail else round(t + 1.0, 3), "api_s": 0.2,
                             "nova_boot_s": None if fail else t, "schedule_to_build_s": t / 2,
                             "polls": 3, "host": "c1", "fault": fault,
                             "error_class": nova_metrics.error_class(fault), "error_type": None,
                             "t_post": 1000.0 + i, "request_id": f"req-{i}"})
            name = (f"NovaServers.boot_server-mariadb-{s}sched-hss1-threading-pool10-c{c}-p{p}-r{rep}"
                    f"-{c:04d}{s}{p:05d}{rep}abcdef-20261122-153332")
            params = {**NOVA_FIXED, "schedulers": s, "preload": p, "concurrency": c, "repetition": rep}
            d = root / name
            _write(d, {"workload": "nova", "params": params, "running_vms": p},
                   nova_metrics.summarize(rows, window_s=60.0))
            pd.DataFrame(rows).to_parquet(d / "boots.parquet")
    return root


BUS_LOCAL = {"rabbitmq×3": 1 / 3, "rabbitmq-federation": 1.0, "nats-gateways": 1.0}
BUS_RTT_MS = {"rabbitmq×3": 4.0, "rabbitmq-federation": 3.0, "nats-gateways": 1.5}


def messaging_results(root: Path, local: Mapping[str, float] | None = None,
                      rtt_ms: Mapping[str, float] | None = None, delays: tuple[float, ...] = (0.0, 25.0),
                      agents: tuple[int, ...] = (10, 100), reps: int = 2, n: int = 300) -> Path:
    """Messaging runs of one call case on three buses: ``local[bus]`` of the deliveries stay in
    the producer's site; call round trip ≈ ``rtt_ms[bus]`` + 2 × delay × (share not local)."""
    local = {**BUS_LOCAL, **(local or {})}
    rtt_ms = {**BUS_RTT_MS, **(rtt_ms or {})}
    rng = np.random.default_rng(11)
    for bus, share in local.items():
        for delay in delays:
            for a in agents:
                for rep in range(reps):
                    is_local = rng.random(n) < share
                    rtt = (rtt_ms[bus] + np.where(is_local, 0.0, 2 * delay) + rng.exponential(0.5, n)) / 1000
                    t_int = 100.0 + np.arange(n) / 50.0
                    m = pd.DataFrame({"id": np.arange(n), "site": 1, "m": "call", "t_int": t_int,
                                      "t_send": t_int, "ok": True, "err": None, "skipped": False,
                                      "warmup": np.arange(n) < 20, "expected": 1, "delivered": 1,
                                      "dups": 0, "local": is_local.astype(int), "rtt_s": rtt,
                                      "rtt_int_s": rtt, "oneway_s": rtt / 2, "spread_s": np.nan})
                    summary = msg_metrics.summarize(m, pd.DataFrame(columns=["id", "srv", "site"]), 5.6)
                    params = {"tc": "tc1", "case": "rpc-call", "method": "call", "clients": a // 2,
                              "servers": a // 2, "targets": 1, "rate": 50.0, "agents": a,
                              "duration_s": 6, "length": 1024, "timeout_s": 30, "work_ms": 0,
                              "clients_in": [1], "servers_in": None, "delay_ms": delay, "sites": 3,
                              "bus": bus, "bus_kind": bus.split("×")[0], "nodes": 3, "queues": "classic",
                              "topology": "gateways", "repetition": rep, "agents_per_process": 50,
                              "pool": 10, "warmup_s": 0.4, "arrivals": "poisson", "seed": 1, "faults": []}
                    tag = zlib.crc32(repr((bus, delay, a, rep)).encode())
                    d = root / f"tc1-rpc-call-{bus}-{delay:g}ms-{a}ag-50ps-r{rep}-{tag:010d}"
                    _write(d, {"workload": "messaging", "params": params,
                               "facts": {"oslo_messaging": "14.9.1"}}, summary)
                    m.to_parquet(d / "messages.parquet")
                    (d / "processes.json").write_text(json.dumps([
                        {"role": r, "agents": a // 2, "rss_kib": 40000, "startup_s": 1.2,
                         "run_cpu_s": 0.8, "cpu_s": 2.0} for r in ("server", "client")]))
    return root
