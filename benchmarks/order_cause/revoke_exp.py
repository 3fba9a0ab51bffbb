"""Interventions on one Keystone deployment (issue 27, docs/run-order.md): does the size of
keystone.revocation_event slow token validation, and what does a Keystone or database restart do?
One deployment (1 site, MariaDB, Keystone with its memcached), authenticate_user_and_validate_token
× 30 (warm-up 6) per phase; between phases the revocation_event table is set to N synthetic rows
(events of users that do not exist, revoked now: they match no token but are checked) by SQL,
and memcached is flushed (flush_all) in EVERY phase, so phases differ only in N. ABAB order.

    PYTHONPATH=src python benchmarks/order_cause/revoke_exp.py galera 0 3000 0 3000 0 3000 > rev.log
    PYTHONPATH=src python benchmarks/order_cause/revoke_exp.py mariadb 0 0 0 0 K 0 0 0 B 0 0 0 > rst.log
    python benchmarks/order_cause/revsum.py rev.log rst.log

A phase N sets the table to N rows; K kills and restarts site 1's Keystone, B the database of
site 1. The last line of the output is every phase as JSON (durations included).
"""
import json
import statistics
import sys
import time

from juice.load.drivers import run_drivers
from juice.services.openstack.keystone import DB_NAME
from juice.services.servercounters import ServerCounters, derived
from juice.studies.keystone import drive, run
from juice.studies.keystone.matrix import expand
from juice.studies.keystone.spec import parse

rdbms = sys.argv[1]
phases = sys.argv[2:]
exp = parse({"name": "revoke", "rdbms": [rdbms], "sites": [3 if rdbms == "galera" else 1],
             "wan": {"delay_ms": [0]}, "scenarios": ["authenticate_user_and_validate_token"],
             "check_wan": False, "runner": {"times": 30, "concurrency": 3, "warmup": 6},
             "keystone": {"cache": [True], "workers": 1, "password_hash_rounds": 4}})
(p,) = expand(exp)
say = lambda m: print("·", m, flush=True)  # noqa: E731
FLUSH = """import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
s.sendall(b"flush_all\\r\\n"); print(s.recv(100))"""
out = []
with run.lab(exp, p.sites, p.wan, say) as lab, run.deployment(lab, p, exp, say) as dep:
    db = dep.db
    srv = db.server if hasattr(db, "server") else next(iter(db.nodes.values()))
    sc = ServerCounters.for_deployment(db, dep.ks.memcached, DB_NAME)
    for i, tok in enumerate(phases):
        if tok == "K":  # kill and restart site 1's Keystone (gunicorn): a fresh process, same DB
            dep.ks.kill(1)
            say(f"keystone restarted {dep.ks.restart(1)}")
            continue
        if tok == "B":  # kill and restart the database server of site 1, same Keystone
            db.kill(1)
            say(f"database restarted {db.restart(1)}")
            continue
        n = int(tok)
        srv.query(f"DELETE FROM {DB_NAME}.revocation_event")
        if n:
            srv.query(f"INSERT INTO {DB_NAME}.revocation_event (user_id, issued_before, revoked_at) "
                      "SELECT CONCAT('u', seq), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) "
                      f"FROM {DB_NAME}.seq_1_to_{n}")
        for s in dep.ks.memcached.server_sites:
            lab.place(s).run(["python3", "-c", FLUSH, lab.site_ip(s), "11211"], timeout=15)
        spec = drive.runner_spec(p)
        jobs = [drive.job(p, 1, spec, drive.keystone_env(dep.ks, 1, drive.pool_size(spec)))]
        s0 = sc.snapshot()
        t0 = time.monotonic()
        (res,) = run_drivers(lab, jobs)
        s1 = sc.snapshot()
        d = derived(s0.values, s1.values)
        ok = [r.duration for r in res.records if not r.error]
        warm = [r.duration for r in res.warmup if not r.error]
        row = {"phase": i, "tok": tok, "revocation_events": n,
               "rows_at_start": d.get("rows.revocation_event"), "mean_s": statistics.mean(ok),
               "median_s": statistics.median(ok), "sd_s": statistics.stdev(ok), "n": len(ok),
               "warmup_mean_s": statistics.mean(warm) if warm else None,
               "cache_hit_rate": d.get("cache_hit_rate"),
               "buffer_pool_reads": d.get("innodb.buffer_pool_reads"),
               "wall_s": time.monotonic() - t0, "durations": ok}
        out.append(row)
        say(json.dumps({k: v for k, v in row.items() if k != "durations"}))
print(json.dumps(out))
