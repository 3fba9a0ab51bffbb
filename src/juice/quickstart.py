"""The quickstart experiment (README's first command): a 3-site lab 50 ms apart (one-way),
its WAN checked, a real MariaDB in site 1 read from every site, all stored as one run with
a Markdown report. Everything it creates is removed at the end, whatever happens.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from juice.lab import LocalLab, spec
from juice.lab.check import CheckReport, check
from juice.results.store import RunDir, tool_version

Progress = Callable[[str], None]


def run(results: Path, *, sites: int = 3, delay_ms: float = 50.0, queries: int = 50,
        progress: Progress = lambda _: None) -> Path:
    """Run the quickstart; returns the path of its Markdown report."""
    lab_spec = spec.parse({"name": "quick", "sites": sites, "delay_ms": delay_ms})
    with RunDir(results, "quickstart") as rd:
        rd.manifest(experiment="quickstart", spec=lab_spec.model_dump(mode="json"),
                    versions={"mariadbd": tool_version(["mariadbd", "--version"]),
                              "iproute2": tool_version(["ip", "-V"])})
        progress(f"lab: {sites} sites, {delay_ms:g} ms one-way between every pair")
        with LocalLab.up(lab_spec, ephemeral=True, replace=True, progress=progress) as lab:
            progress("checking the WAN (RTT of every pair)")
            rep = check(lab, probes=30)
            rd.write_json("wan-check.json", rep.to_dict())
            progress("MariaDB in site 1, queried from every site")
            db = _db_latency(lab, queries, rd.file("logs"), progress)
            rd.write_json("db-latency.json", db)
            rd.write_text("report.md", render(lab_spec, lab.state.backend, rep, db))
    return rd.path / "report.md"


def _db_latency(lab: LocalLab, queries: int, logs: Path, progress: Progress) -> dict[str, Any]:
    from juice.services import client
    from juice.services.base import Endpoint
    from juice.services.mariadb import MariaDBCentral, connect

    out: dict[str, Any] = {"queries_per_site": queries, "unit": "ms", "sites": {}}
    with MariaDBCentral(lab, progress=progress).up() as db:
        for site in lab.sites:
            ep = db.endpoint(site).write

            def probe(ep: Endpoint = ep) -> list[float]:
                conn = connect(ep)
                try:
                    with conn.cursor() as cur:
                        samples = []
                        for _ in range(queries):
                            t0 = time.perf_counter_ns()
                            cur.execute("SELECT 1")
                            cur.fetchall()
                            samples.append((time.perf_counter_ns() - t0) / 1e6)
                        return samples
                finally:
                    conn.close()

            samples = client.in_site(lab.site_ns(site), probe)
            out["sites"][str(site)] = {
                "p50_ms": round(statistics.median(samples), 3),
                "p99_ms": round(sorted(samples)[int(0.99 * (len(samples) - 1))], 3),
                "rtt_to_site1_ms": 0.0 if site == 1 else
                lab.links[(site, 1)].delay_ms + lab.links[(1, site)].delay_ms}
            progress(f"site {site}: SELECT p50 {out['sites'][str(site)]['p50_ms']} ms")
        db.collect_logs(logs)
    return out


def render(lab_spec: spec.LabSpec, backend: str, rep: CheckReport, db: dict[str, Any]) -> str:
    lines = [f"# Juice quickstart — {time.strftime('%Y-%m-%d %H:%M:%S')}", "",
             f"{lab_spec.sites} sites, uniform {lab_spec.delay_ms:g} ms one-way delay "
             f"(= {2 * (lab_spec.delay_ms or 0):g} ms RTT), WAN emulated with **{backend}**.", "",
             "## WAN check (round trip, ms)", "",
             "| pair | expected | median | p99 | received | result |",
             "|---|---:|---:|---:|---:|---|"]
    for p in rep.pairs:
        lines.append(f"| {p.a}-{p.b} | {p.expected_rtt_ms:g} | {p.median_rtt_ms} | {p.p99_rtt_ms} "
                     f"| {p.received}/{p.sent} | {'pass' if p.ok else 'FAIL'} |")
    lines += ["", "## MariaDB in site 1: `SELECT 1` from each site (ms)", "",
              "A read from a remote site pays one round trip to site 1.", "",
              "| client site | RTT to site 1 | p50 | p99 |", "|---:|---:|---:|---:|"]
    for site, r in db["sites"].items():
        lines.append(f"| {site} | {r['rtt_to_site1_ms']:g} | {r['p50_ms']} | {r['p99_ms']} |")
    lines += ["", "Raw data: `wan-check.json`, `db-latency.json`; provenance: `manifest.json`.", ""]
    return "\n".join(lines)
