"""Galera across the WAN: bring-up time, cluster size, commit latency vs RTT, and the
asymmetric-delay experiment explaining "1.5 RTT per commit" (see databases.md).

    /var/cache/juice/venv/bin/python benchmarks/db_galera.py --sites 9 --delay 150
    /var/cache/juice/venv/bin/python benchmarks/db_galera.py --asym        # 3 sites, pair overrides

Bounded (every wait has a timeout) and self-cleaning (ephemeral lab: leaving it, or a crash
followed by the next juice command, removes servers, namespaces and data).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from juice.lab import LocalLab, spec
from juice.lab import setns as client
from juice.services import deploy
from juice.services.databases import mariadb as mdb
from juice.services.databases.galera import Galera


def commit_latency(lab: LocalLab, db: Galera, site: int, n: int, table: str) -> list[float]:
    """n autocommit single-row INSERTs from a client in ``site`` to its local node (ms)."""
    ep = db.endpoint(site).write

    def body() -> list[float]:
        conn = mdb.connect(ep, timeout=60)
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE TABLE IF NOT EXISTS {table} (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
                cur.execute(f"INSERT INTO {table} (v) VALUES (0)")  # warm-up
                out = []
                for i in range(n):
                    t0 = time.perf_counter_ns()
                    cur.execute(f"INSERT INTO {table} (v) VALUES ({i})")
                    out.append((time.perf_counter_ns() - t0) / 1e6)
                return out
        finally:
            conn.close()

    return client.in_site(lab.site_ns(site), body, timeout=600)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 1)


def rtt(lab: LocalLab, a: int, b: int) -> float:
    return lab.links[(a, b)].delay_ms + lab.links[(b, a)].delay_ms


def safe_model(lab: LocalLab, a: int, nodes: list[int]) -> float:
    """Hypothesis (EVS SAFE delivery): A's commit waits until A knows every node B has
    received everything up to the write-set, including every other node C's message for
    that sequence number: max over B, C of d(A,C)+d(C,B)+d(B,A), and at least 2 d(A,B)."""
    d = {k: v.delay_ms for k, v in lab.links.items()}
    best = 0.0
    for b in nodes:
        if b == a:
            continue
        best = max(best, d[(a, b)] + d[(b, a)])
        for c in nodes:
            if c not in (a, b):
                best = max(best, d[(a, c)] + d[(c, b)] + d[(b, a)])
    return best


def scale(args: argparse.Namespace) -> dict[str, Any]:
    lab_spec = spec.parse({"name": "dbgal", "sites": args.sites, "delay_ms": args.delay})
    res: dict[str, Any] = {"sites": args.sites, "delay_ms_one_way": args.delay, "sst": args.sst}
    with LocalLab.up(lab_spec, ephemeral=True) as lab:
        t0 = time.monotonic()
        with deploy(lab, "galera", lambda m: print("  ·", m, flush=True), timeout=300, sst=args.sst) as db:
            assert isinstance(db, Galera)
            res["bringup_s"] = round(time.monotonic() - t0, 1)
            res["timings"] = {k: round(v, 1) for k, v in db.timings.items()}
            res["cluster_size"] = [db.cluster_size(n) for n in db.nodes.values()]
            res["wsrep_ready"] = all(n.status("wsrep_ready") == "ON" for n in db.nodes.values())
            lat = commit_latency(lab, db, 1, args.commits, "bench")
            far = max(rtt(lab, 1, s) for s in lab.sites if s != 1)
            res["commit_ms"] = {"p50": pct(lat, 0.5), "p90": pct(lat, 0.9), "n": len(lat)}
            res["rtt_to_farthest_ms"] = far
            res["p50_in_rtt"] = round(statistics.median(lat) / far, 2) if far else None
            res["safe_model_ms"] = safe_model(lab, 1, list(lab.sites))
            res["cluster_size_after"] = [db.cluster_size(n) for n in db.nodes.values()]
    return res


ASYM = [
    ("uniform 50", []),
    ("B-C 0", [{"a": 2, "b": 3, "delay_ms": 0}]),
    ("B-C 100", [{"a": 2, "b": 3, "delay_ms": 100}]),
    ("C far (A-C 50, A-B 0, B-C 50)", [{"a": 1, "b": 2, "delay_ms": 0}]),
    ("A-B 10, A-C 50, B-C 50", [{"a": 1, "b": 2, "delay_ms": 10}]),
]


def asym(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Site 1 = A (client + its local node), 2 = B, 3 = C; uniform 50 ms then overrides."""
    rows = []
    base = {"name": "dbasym", "sites": 3, "delay_ms": 50.0}
    with LocalLab.up(spec.parse(base), ephemeral=True) as lab:
        extra = tuple((k, v) for k, v in (x.split("=", 1) for x in args.provider))
        with deploy(lab, "galera", lambda m: print("  ·", m, flush=True), provider_extra=extra) as db:
            assert isinstance(db, Galera)
            for i, (label, pairs) in enumerate(ASYM):
                lab.set_wan(spec.parse({**base, "pairs": pairs}))
                time.sleep(1.0)
                lat = commit_latency(lab, db, 1, args.commits, f"asym{i}")
                far = max(rtt(lab, 1, s) for s in (2, 3))
                row = {"case": label, "d_AB": lab.links[(1, 2)].delay_ms, "d_AC": lab.links[(1, 3)].delay_ms,
                       "d_BC": lab.links[(2, 3)].delay_ms, "p50_ms": pct(lat, 0.5), "p90_ms": pct(lat, 0.9),
                       "rtt_farthest_ms": far, "safe_model_ms": safe_model(lab, 1, [1, 2, 3])}
                print("  ", json.dumps(row), flush=True)
                rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sites", type=int, default=9)
    ap.add_argument("--delay", type=float, default=150.0, help="uniform ONE-WAY delay, ms")
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--sst", default="seed", choices=["seed", "rsync"])
    ap.add_argument("--asym", action="store_true", help="run the asymmetric 3-site experiment instead")
    ap.add_argument("--provider", action="append", default=[], help="extra provider option k=v (asym)")
    args = ap.parse_args()
    out = {"asym": asym(args)} if args.asym else scale(args)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    sys.exit(main())
