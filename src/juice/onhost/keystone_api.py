"""Requests to Keystone's API made AT a place (``juice.services.openstack.keystone`` and its
``keystone_warm``), with the OpenStack venv's Python; standard library only. The admin is read
from ``OS_USERNAME``/``OS_PASSWORD``/``OS_PROJECT_NAME`` (never on the command line).

    python3 -c "$(source keystone_api)" regions URL '[[REGION, ENDPOINT_URL], ...]'
    python3 -c "$(source keystone_api)" prewarm URL REQUESTS THREADS

``regions``: each region and its public/internal/admin identity endpoints, created when
missing (idempotent; 4 regions at a time); exit 1 naming the first request Keystone refused.
``prewarm``: one password authentication, then REQUESTS requests that hash no password (token
re-scoping, validation, project and user listings; THREADS at a time); prints
``{"requests": n, "errors": n}``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from email.message import Message
from typing import Any


def request(base: str, method: str, path: str, body: Any = None, token: str | None = None,
            subject: str | None = None, timeout: float = 60.0) -> tuple[int, Message, bytes]:
    """``(status, headers, body)`` of one request to ``base + path`` (an HTTP error is an answer)."""
    hdr = {"Content-Type": "application/json", **({"X-Auth-Token": token} if token else {}),
           **({"X-Subject-Token": subject} if subject else {})}
    req = urllib.request.Request(base + path, method=method, headers=hdr,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def admin_scope(env: Mapping[str, str]) -> dict[str, Any]:
    return {"project": {"name": env["OS_PROJECT_NAME"], "domain": {"id": "default"}}}


def password_auth(env: Mapping[str, str]) -> dict[str, Any]:
    """The body of a password authentication of the admin in ``env``, scoped to its project."""
    return {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": env["OS_USERNAME"], "domain": {"id": "default"}, "password": env["OS_PASSWORD"]}}},
        "scope": admin_scope(env)}}


def call(base: str, method: str, path: str, body: Any = None, token: str | None = None,
         ok: tuple[int, ...] = (200,)) -> tuple[Message, Any]:
    """``(headers, JSON body)``; SystemExit naming the request when the status is not in ``ok``."""
    status, headers, data = request(base, method, path, body, token)
    if status not in ok:
        sys.exit(f"keystone {method} {path}: {status} {data[:200]!r}")
    return headers, (json.loads(data) if data else {})


def register_regions(base: str, want: list[list[str]], env: Mapping[str, str]) -> None:
    """Each ``[region, url]`` of ``want`` and its three identity endpoints, when missing."""
    token = call(base, "POST", "/auth/tokens", password_auth(env), ok=(201,))[0]["X-Subject-Token"]
    services = call(base, "GET", "/services?type=identity", token=token)[1]["services"]
    if not services:
        sys.exit("bootstrap created no identity service")
    sid = services[0]["id"]
    regions = {r["id"] for r in call(base, "GET", "/regions", token=token)[1]["regions"]}
    have = {(e["region_id"], e["interface"])
            for e in call(base, "GET", f"/endpoints?service_id={sid}", token=token)[1]["endpoints"]}

    def add(item: list[str]) -> None:
        reg, url = item
        if reg not in regions:
            call(base, "POST", "/regions", {"region": {"id": reg}}, token, ok=(201,))
        for iface in ("public", "internal", "admin"):
            if (reg, iface) not in have:
                call(base, "POST", "/endpoints", {"endpoint": {"service_id": sid, "interface": iface,
                                                              "region_id": reg, "url": url}},
                     token, ok=(201,))

    with ThreadPoolExecutor(max_workers=4) as ex:
        list(ex.map(add, want))


def prewarm(base: str, n: int, threads: int, env: Mapping[str, str]) -> dict[str, int]:
    """One password authentication, then ``n`` requests that hash no password (see the module
    doc); SystemExit when the authentication is refused."""
    scope = admin_scope(env)
    st, h, _ = request(base, "POST", "/auth/tokens", password_auth(env))
    if st != 201:
        sys.exit(f"keystone POST /auth/tokens: {st}")
    admin = h["X-Subject-Token"]

    def one(i: int) -> bool:
        k = i % 4
        if k == 0:
            return request(base, "POST", "/auth/tokens", {"auth": {"identity": {
                "methods": ["token"], "token": {"id": admin}}, "scope": scope}})[0] == 201
        if k == 1:
            return request(base, "GET", "/auth/tokens", token=admin, subject=admin)[0] == 200
        return request(base, "GET", "/projects" if k == 2 else "/users", token=admin)[0] == 200

    with ThreadPoolExecutor(max_workers=threads) as ex:
        ok = list(ex.map(one, range(n)))
    return {"requests": n + 1, "errors": ok.count(False)}


def main(argv: list[str]) -> None:
    if argv[0] == "regions":
        register_regions(argv[1], json.loads(argv[2]), os.environ)
    elif argv[0] == "prewarm":
        print(json.dumps(prewarm(argv[1], int(argv[2]), int(argv[3]), os.environ)))
    else:
        sys.exit(f"keystone_api: unknown operation {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
