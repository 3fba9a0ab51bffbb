"""Juice's load engine vs real Rally (rally-openstack 4.1.0), against the SAME Keystone.

    /var/cache/juice/venv/bin/python benchmarks/rally_compare.py --times 100 --concurrency 5

One ephemeral 1-site lab, a real MariaDB and a real Keystone (gunicorn, memcached) in it.
For each scenario, Rally (`rally task start`, in its own venv, inside the site's namespace)
and a Juice driver run the same scenario with the same times/concurrency and the same
context (1 tenant × 1 user). Both run as child processes of this script, so their whole
CPU time (user + system, every descendant, setup/validation/contexts included) is read from
RUSAGE_CHILDREN. Per-action means come from each tool's own output (Rally's
`task report --json`, Juice's records). Rally and Juice alternate (Rally, Juice, Rally,
Juice...) when --rounds > 1, so drift on a shared host hits both.

Prints one JSON line per (scenario, tool, round) and a summary table; writes everything to
benchmarks/results/rally_compare.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import secrets
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from juice.lab import LocalLab, spec
from juice.load.drivers import DriverJob, run_drivers
from juice.load.runner import RunnerSpec
from juice.services import kinds
from juice.services.openstack.keystone import Keystone, KeystoneOptions
from juice.studies.keystone.drive import keystone_env

RALLY = Path(os.environ.get("JUICE_CACHE", "/var/cache/juice")) / "rally" / "bin" / "rally"
OUT = Path(__file__).resolve().parent / "results" / "rally_compare.json"
SCENARIOS = {"auth": "authenticate_user_and_validate_token", "cuup": "create_user_update_password"}


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def action_means(data: list[dict[str, Any]]) -> dict[str, float]:
    acc: dict[str, list[float]] = {}
    for it in data:
        if it.get("error"):
            continue
        for a in it.get("atomic_actions", []):
            acc.setdefault(a["name"], []).append(a["finished_at"] - a["started_at"])
    return {k: round(statistics.fmean(v), 5) for k, v in acc.items()}


def summarise(tool: str, scenario: str, rnd: int, data: list[dict[str, Any]], cpu_s: float,
              wall_s: float) -> dict[str, Any]:
    ok = [d["duration"] for d in data if not d.get("error")]
    return {"tool": tool, "scenario": scenario, "round": rnd, "iterations": len(data),
            "failures": sum(1 for d in data if d.get("error")),
            "mean_s": round(statistics.fmean(ok), 5) if ok else None,
            "p50_s": round(statistics.median(ok), 5) if ok else None,
            "actions_mean_s": action_means(data), "client_cpu_s": round(cpu_s, 3),
            "cpu_ms_per_iteration": round(1000 * cpu_s / max(1, len(data)), 2), "wall_s": round(wall_s, 2)}


def write_env_spec(ks: Keystone, site: int, region_site: int, path: Path) -> Path:
    """Rally's env spec (the admin of ``ks``, its Keystone in ``site``), mode 0600: it holds the
    password (Rally's own format; the file lives in a throwaway dir)."""
    c = ks.admin_credentials()
    envspec = {"openstack": {"auth_url": ks.auth_url(site), "region_name": ks.region(region_site),
                             "endpoint_type": "public",
                             "admin": {"username": c.username, "password": c.password,
                                       "user_domain_name": c.user_domain_name,
                                       "project_name": c.project_name,
                                       "project_domain_name": c.project_domain_name}}}
    path.write_text(json.dumps(envspec))
    path.chmod(0o600)
    return path


class RallyHome:
    """A throwaway Rally: sqlite DB, one env pointing at the lab's Keystone in site 1."""

    def __init__(self, lab: LocalLab, ks: Keystone, tmp: Path) -> None:
        self.lab, self.tmp = lab, tmp
        self.conf = tmp / "rally.conf"
        self.conf.write_text(f"[database]\nconnection = sqlite:///{tmp}/rally.sqlite\n")
        self.env = {**os.environ, "HOME": str(tmp)}
        self.rally(["db", "create"])
        path = write_env_spec(ks, 1, 1, tmp / "env.json")
        self.rally(["env", "create", "--name", "juice", "--spec", str(path)])

    def rally(self, args: list[str], timeout: float = 3600) -> subprocess.CompletedProcess[str]:
        argv = ["ip", "netns", "exec", self.lab.site_ns(1), str(RALLY), "--config-file", str(self.conf),
                *args]
        cp = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if cp.returncode != 0:
            raise SystemExit(f"rally {' '.join(args)} failed: {(cp.stderr or cp.stdout)[-800:]}")
        return cp

    def run(self, scenario: str, times: int, concurrency: int) -> tuple[list[dict[str, Any]], float, float]:
        task = {"version": 2, "title": f"compare {scenario}", "subtasks": [{
            "title": scenario, "scenario": {f"KeystoneBasic.{scenario}": {}},
            "runner": {"constant": {"times": times, "concurrency": concurrency}},
            "contexts": {"users": {"tenants": 1, "users_per_tenant": 1}}}]}
        tf = self.tmp / f"task-{secrets.token_hex(3)}.json"
        tf.write_text(json.dumps(task))
        cpu0, t0 = children_cpu(), time.monotonic()
        cp = self.rally(["task", "start", str(tf)])
        wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
        found = re.search(r"Task\s+([0-9a-f-]{36})", cp.stdout)
        if not found:
            raise SystemExit(f"no task uuid in rally's output: {cp.stdout[-400:]}")
        out = self.tmp / "report.json"
        self.rally(["task", "report", found.group(1), "--json", "--out", str(out)])
        doc = json.loads(out.read_text())
        data = doc["tasks"][0]["subtasks"][0]["workloads"][0]["data"]
        keep = OUT.parent / f"rally-{scenario}.json"  # real rally-openstack output, for juice analyze
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_text(out.read_text())
        self.cross_check(doc, keep)
        return data, cpu, wall

    @staticmethod
    def cross_check(doc: dict[str, Any], path: Path) -> None:
        """`juice analyze` on Rally's own file must give Rally's own per-action means."""
        from juice.analysis import describe
        from juice.results import tidy

        stats = doc["tasks"][0]["subtasks"][0]["workloads"][0]["statistics"]["durations"]["atomics"]
        rally_means = {a["name"]: a["data"]["avg"] for a in stats}
        table = describe(tidy.load([path]))
        ours = {str(r["operation"]): float(r["mean"]) for _, r in table.reset_index().iterrows()
                if str(r["operation"]) in rally_means}
        for name, avg in rally_means.items():
            mine = ours.get(name, float("nan"))
            print(f"  rally report mean {name}: {avg:.4f} s · juice analyze: {mine:.4f} s"
                  f" · |diff| {abs(mine - avg) * 1000:.2f} ms", flush=True)


def juice_run(lab: LocalLab, ks: Keystone, scenario: str, times: int,
              concurrency: int) -> tuple[list[dict[str, Any]], float, float]:
    job = DriverJob(site=1, scenario=f"KeystoneBasic.{scenario}",
                    contexts={"users": {"tenants": 1, "users_per_tenant": 1}},
                    runner=RunnerSpec(times=times, concurrency=concurrency),
                    env=keystone_env(ks, 1, concurrency))
    cpu0, t0 = children_cpu(), time.monotonic()
    res = run_drivers(lab, [job])[0]
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if res.failure:
        raise SystemExit(f"juice driver failed: {res.failure}")
    return [r.to_rally() for r in res.records], cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--times", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scenarios", default="auth,cuup", help="comma list of: " + ",".join(SCENARIOS))
    ap.add_argument("--rdbms", default="mariadb")
    ap.add_argument("--hash-rounds", type=int, default=4)
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    name = "rc" + secrets.token_hex(2)
    lab_spec = spec.parse({"name": name, "sites": 1})
    with LocalLab.up(lab_spec, ephemeral=True) as lab, kinds.deploy(lab, a.rdbms) as db, \
            tempfile.TemporaryDirectory(prefix="juice-rally-") as tmp:
        ks = Keystone(lab, db, options=KeystoneOptions(cache=True, password_hash_rounds=a.hash_rounds))
        ks.up()
        try:
            rally = RallyHome(lab, ks, Path(tmp))
            for key in a.scenarios.split(","):
                scenario = SCENARIOS[key]
                for rnd in range(a.rounds):
                    for tool in ("rally", "juice"):
                        if tool == "rally":
                            data, cpu, wall = rally.run(scenario, a.times, a.concurrency)
                        else:
                            data, cpu, wall = juice_run(lab, ks, scenario, a.times, a.concurrency)
                        row = summarise(tool, scenario, rnd, data, cpu, wall)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
        finally:
            ks.stop()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"times": a.times, "concurrency": a.concurrency, "rdbms": a.rdbms,
                               "load_avg": os.getloadavg(), "rows": rows}, indent=1))
    print(f"\n{'scenario':38} {'tool':6} {'mean s':>8} {'p50 s':>8} {'fail':>4} {'CPU ms/it':>10}")
    for r in rows:
        print(f"{r['scenario']:38} {r['tool']:6} {r['mean_s']!s:>8} {r['p50_s']!s:>8} {r['failures']:>4} "
              f"{r['cpu_ms_per_iteration']:>10}")
    for scenario in {r["scenario"] for r in rows}:
        cpu = {t: statistics.fmean(r["cpu_ms_per_iteration"] for r in rows
                                   if r["scenario"] == scenario and r["tool"] == t)
               for t in ("rally", "juice")}
        print(f"{scenario}: Juice uses {cpu['juice'] / cpu['rally']:.2f}× Rally's client CPU per iteration")


if __name__ == "__main__":
    main()
