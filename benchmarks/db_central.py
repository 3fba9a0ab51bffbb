"""Centralized MariaDB and PostgreSQL read-local across the WAN: what a read and a write
cost from each site, in round trips (see databases.md).

    /var/cache/juice/venv/bin/python benchmarks/db_central.py --sites 3 --delay 50

MariaDB in site 1: a SELECT from site k pays one RTT to site 1; a "pooled read" (SELECT then
the ROLLBACK an SQLAlchemy pool sends when the connection is returned) pays two.
PostgreSQL read-local: reads from the local standby (LAN), writes to the primary in site 1
(one RTT), and with a synchronous quorum also the RTT to the quorum of standbys.
Bounded and self-cleaning (ephemeral lab).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from juice.lab import LocalLab, spec
from juice.lab import setns as client
from juice.services import deploy
from juice.services.databases import mariadb as mdb
from juice.services.databases import postgres as pg
from juice.services.databases.postgres import Postgres


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs), 2)


def timed(n: int, op: Callable[[int], None]) -> list[float]:
    op(-1)  # warm-up
    out = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        op(i)
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def rtt(lab: LocalLab, a: int, b: int) -> float:
    return 0.0 if a == b else lab.links[(a, b)].delay_ms + lab.links[(b, a)].delay_ms


def mariadb_part(lab: LocalLab, n: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    with deploy(lab, "mariadb") as db:
        for site in lab.sites:
            ep = db.endpoint(site).read

            def body(ep: mdb.Endpoint = ep) -> dict[str, float]:
                conn = mdb.connect(ep, autocommit=False)
                try:
                    with conn.cursor() as cur:
                        def select(_: int) -> None:
                            cur.execute("SELECT 1")
                            cur.fetchall()

                        def pooled(_: int) -> None:
                            cur.execute("SELECT 1")
                            cur.fetchall()
                            conn.rollback()  # what the pool does on return (reset_on_return)

                        return {"select_p50_ms": p50(timed(n, select)),
                                "pooled_read_p50_ms": p50(timed(n, pooled))}
                finally:
                    conn.close()

            row = client.in_site(lab.site_ns(site), body)
            row["rtt_to_site1_ms"] = rtt(lab, site, 1)
            res[str(site)] = row
            print("  mariadb site", site, json.dumps(row), flush=True)
    return res


def postgres_part(lab: LocalLab, n: int, quorum: int) -> dict[str, Any]:
    res: dict[str, Any] = {}
    with deploy(lab, "postgres-readlocal", sync_quorum=quorum) as db:
        assert isinstance(db, Postgres)
        db.primary.query("CREATE TABLE w (id serial primary key, site int)", "juice")
        for site in lab.sites:
            eps = db.endpoint(site)

            def body(eps: Any = eps, site: int = site) -> dict[str, float]:
                with pg.connect(eps.read) as r, pg.connect(eps.write) as w:
                    def read(_: int) -> None:
                        r.execute(b"SELECT 1").fetchall()

                    def write(_: int) -> None:
                        w.execute(f"INSERT INTO w (site) VALUES ({site})".encode())

                    return {"read_p50_ms": p50(timed(n, read)), "write_p50_ms": p50(timed(n, write))}

            row: dict[str, Any] = client.in_site(lab.site_ns(site), body)
            row["read_from"] = eps.read.site
            row["rtt_to_site1_ms"] = rtt(lab, site, 1)
            res[str(site)] = row
            print(f"  postgres quorum={quorum} site", site, json.dumps(row), flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sites", type=int, default=3)
    ap.add_argument("--delay", type=float, default=50.0, help="uniform ONE-WAY delay, ms")
    ap.add_argument("-n", type=int, default=20, help="operations per measurement")
    args = ap.parse_args()
    out: dict[str, Any] = {"sites": args.sites, "delay_ms_one_way": args.delay}
    with LocalLab.up(spec.parse({"name": "dbcen", "sites": args.sites, "delay_ms": args.delay}),
                     ephemeral=True) as lab:
        out["mariadb_central"] = mariadb_part(lab, args.n)
        out["postgres_readlocal_async"] = postgres_part(lab, args.n, 0)
        out["postgres_readlocal_sync1"] = postgres_part(lab, args.n, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
