"""Keystone bring-up time: N sites, a Keystone (gunicorn) + memcached per site, on Galera.

    /var/cache/juice/venv/bin/python benchmarks/keystone_bringup.py --sites 3 9 --delay 5

Prints, per site count, the database bring-up and Keystone's phases (keystone-manage
db_sync / fernet_setup / credential_setup in parallel, bootstrap, every gunicorn answering
GET /v3, the per-site regions), then checks a token issued in site 1 validates in site N.
Bounded and self-cleaning (ephemeral lab). Timings depend on the host's load: the host has
2 cores and ``gunicorn`` workers import Keystone in parallel.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time

from juice.lab import LocalLab, spec
from juice.openstack.http import issue_token, validate_token
from juice.services import kinds
from juice.services.openstack.keystone import Keystone, KeystoneOptions


def one(sites: int, delay: float, rounds: int, workers: int) -> dict[str, object]:
    name = "kb" + secrets.token_hex(2)
    with LocalLab.up(spec.parse({"name": name, "sites": sites, "delay_ms": delay}), ephemeral=True) as lab:
        t0 = time.monotonic()
        with kinds.deploy(lab, "galera") as db:
            db_s = time.monotonic() - t0
            ks = Keystone(lab, db, options=KeystoneOptions(password_hash_rounds=rounds, workers=workers))
            t1 = time.monotonic()
            try:
                ks.up()
                ks_s = time.monotonic() - t1
                tok = issue_token(lab, 1, ks.admin_credentials())
                ok = validate_token(lab, sites, ks.auth_url(sites), tok).status == 200
                facts = ks.facts()
            finally:
                ks.stop()
    return {"sites": sites, "delay_ms_one_way": delay, "galera_up_s": round(db_s, 1),
            "keystone_up_s": round(ks_s, 1), "cross_site_token_ok": ok, "phases_s": facts["timings_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, nargs="+", default=[3, 9])
    ap.add_argument("--delay", type=float, default=5.0, help="one-way delay between sites, ms")
    ap.add_argument("--hash-rounds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    for n in a.sites:
        print(json.dumps(one(n, a.delay, a.hash_rounds, a.workers)), flush=True)


if __name__ == "__main__":
    main()
