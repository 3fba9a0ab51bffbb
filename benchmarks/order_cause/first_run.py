"""Is the first run on a fresh Keystone deployment slower, and why? (issue 27, docs/run-order.md)

Deploys the quickstart's MariaDB point (3 sites, 0 ms, Keystone with 1 worker and its cache,
light load: the driver in site 1) DEPLOYMENTS times, fresh each time, and on each runs PLAN: a
string of steps, R = one run of authenticate_user_and_validate_token × 30 (concurrency 3,
warm-up WARMUP iterations, Rally's users context: exactly the study's run), K = kill and restart
site 1's Keystone (a fresh gunicorn, same database), B = kill and restart the database, W<n> =
n extra authenticate iterations sent before the next run and not measured (a pre-warm), S<n> =
n seconds of idling.

    PYTHONPATH=src python benchmarks/order_cause/first_run.py 3 RRRRR 6 > fr.log
    PYTHONPATH=src python benchmarks/order_cause/first_run.py 2 RRRKRR 6 >> fr.log
    python benchmarks/order_cause/first_run_sum.py fr.log

Each run prints a JSON line (prefix ``run``): its deployment, step, the 1-minute load average,
the mean of its measured iterations and every iteration's duration in start order (warm-up
first), with each iteration's atomic actions, and the servers' counters around it
(juice.services.servercounters, derived). Run it alone on the machine, as root.
"""

import json
import os
import statistics
import sys
import time

from juice.load.drivers import run_drivers
from juice.services.openstack.keystone import DB_NAME
from juice.services.servercounters import ServerCounters, derived
from juice.studies.keystone import drive, run
from juice.studies.keystone.matrix import expand
from juice.studies.keystone.spec import parse

deployments, plan = int(sys.argv[1]), sys.argv[2]
warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 6
rdbms = sys.argv[4] if len(sys.argv) > 4 else "mariadb"
# Optional 5th argument: "prewarm" (the default: Juice's pre-warm through every worker's first
# full garbage collection, juice.services.openstack.keystone_warm) or "cold" (keystone.prewarm false: the
# first requests after deploying are the run's). Either way the Keystone log has a line per full
# collection (pid, ms), returned per run as "gc".
mode = sys.argv[5] if len(sys.argv) > 5 else "prewarm"


def point(times: int, warm: int) -> object:
    exp = parse({"name": "firstrun", "seed": 1, "rdbms": [rdbms], "sites": [3],
                 "wan": {"delay_ms": [0]}, "load": ["light"],
                 "scenarios": ["authenticate_user_and_validate_token"], "check_wan": False,
                 "runner": {"times": times, "concurrency": 3, "warmup": warm},
                 "keystone": {"cache": [True], "workers": 1, "password_hash_rounds": 4,
                              "prewarm": mode == "prewarm"}})
    (p,) = expand(exp)
    return exp, p


def say(m: str) -> None:
    print("·", m, flush=True)


def steps(s: str) -> list[str]:
    out, i = [], 0
    while i < len(s):
        if s[i] in "WS":
            j = i + 1
            while j < len(s) and s[j].isdigit():
                j += 1
            out.append(s[i:j])
            i = j
        else:
            out.append(s[i])
            i += 1
    return out


exp, p = point(30, warmup)
for d in range(deployments):
    with run.lab(exp, p.sites, p.wan, say) as lab, run.deployment(lab, p, exp, say) as dep:
        t_up = time.time()
        sc = ServerCounters.for_deployment(dep.db, dep.ks.memcached, DB_NAME, keystone=dep.ks)
        for k, tok in enumerate(steps(plan)):
            if tok == "K":
                dep.ks.kill(1)
                say(f"keystone restarted {dep.ks.restart(1)}")
                continue
            if tok == "B":
                dep.db.kill(1)
                say(f"database restarted {dep.db.restart(1)}")
                continue
            if tok.startswith("S"):  # the deployment idles for that many seconds
                time.sleep(int(tok[1:]))
                continue
            if tok.startswith("W"):
                _, wp = point(int(tok[1:]), 0)
                spec = drive.runner_spec(wp)  # type: ignore[arg-type]
                jobs = [drive.job(wp, 1, spec, drive.keystone_env(dep.ks, 1, drive.pool_size(spec)))]  # type: ignore[arg-type]
                (res,) = run_drivers(lab, jobs)
                say(f"pre-warm: {len(res.records)} iterations, mean "
                    f"{statistics.mean(r.duration for r in res.records):.4f} s")
                continue
            spec = drive.runner_spec(p)  # type: ignore[arg-type]
            jobs = [drive.job(p, 1, spec, drive.keystone_env(dep.ks, 1, drive.pool_size(spec)))]  # type: ignore[arg-type]
            load1 = os.getloadavg()[0]
            s0 = sc.snapshot()
            (res,) = run_drivers(lab, jobs)
            counters = derived(s0.values, sc.snapshot().values)
            its = sorted(res.warmup + res.records, key=lambda r: r.timestamp)
            ok = [r.duration for r in res.records if not r.error]
            row = {"deployment": d, "step": k, "plan": plan, "warmup": warmup, "load1": load1,
                   "since_deploy_s": round(time.time() - t_up, 1), "mean_s": statistics.mean(ok),
                   "median_s": statistics.median(ok), "n": len(ok),
                   "errors": sum(1 for r in res.records if r.error),
                   "its": [{"w": r.warmup, "t": round(r.timestamp, 4), "d": round(r.duration, 5),
                            "a": {a["name"]: round(a["finished_at"] - a["started_at"], 5)
                                  for a in r.atomic_actions if "finished_at" in a}}
                           for r in its]}
            log = dep.ks.log(1).read_text(errors="replace").splitlines()
            row["gc"] = [ln[ln.index("juice-gc"):] for ln in log if "juice-gc" in ln]
            row["mode"] = mode
            row["counters"] = counters
            row["prewarm"] = dep.ks.facts()["prewarm"]
            print("run " + json.dumps(row), flush=True)
            say(f"deployment {d} step {k}: mean {row['mean_s']:.4f} s (load {load1:.2f})")
