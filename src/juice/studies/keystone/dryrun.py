"""The dry run of a study against an existing cloud: every API call a run will make and every
resource it will create, without contacting the cloud.

    juice run examples/existing-cloud.yaml --dry-run

How: the run's own code (the drivers' scenarios and contexts, the connection check, the RTT
probes and the cleanup after each run) is executed against :class:`SimulatedKeystone`, an
in-memory recording stand-in of Keystone's v3 API that answers what those code paths read.
So the list is the run's, not a description of it: one row per (method, path), ids written
``{id}``, with counts.

Where the real run can differ, and why (stated with the listing):

- a request that fails on the real cloud ends its iteration early (fewer calls follow);
- an open loop (``runner.rate``) drops arrivals beyond ``max_in_flight``: fewer iterations;
  ``warmup_s`` (seconds) runs as many warm-up iterations as fit: not known in advance;
- ``GET /v3/domains/Default`` is a 404 (the default domain's id is ``default``) and Rally then
  lists domains by name, as Keystone 30 on MariaDB 10.11 answers here; a Keystone answering
  200 there makes one call fewer per creation;
- high load runs one driver per region: the calls of a driver, times the regions.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from juice.openstack.keystone import KeystoneClient, KeystoneError

ID_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
SEED_ROLES = ("admin", "member", "reader")
CREATES = {"users": "user", "projects": "project", "roles": "role", "services": "service",
           "domains": "domain", "groups": "group"}


def template(method: str, path: str) -> str:
    """``GET /v3/users/<32 hex>`` -> ``GET /v3/users/{id}`` (queries keep their names)."""
    return f"{method} {ID_RE.sub('{id}', path)}"


@dataclass
class Recorder:
    """Calls of one dry run, in order: (phase, method + path template, status)."""

    phase: str = "run"
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    def counts(self, phase: str | None = None) -> Counter[str]:
        return Counter(c for p, c, _ in self.calls if phase is None or p == phase)

    def created(self, phase: str | None = None) -> Counter[str]:
        out: Counter[str] = Counter()
        for p, c, status in self.calls:
            m, _, path = c.partition(" ")
            coll = path.removeprefix("/v3/")
            if (phase is None or p == phase) and m == "POST" and coll in CREATES and status == 201:
                out[CREATES[coll]] += 1
        return out


RECORDER = Recorder()


class SimulatedKeystone(KeystoneClient):
    """A recording, in-memory Keystone v3 (named so: it stands in for nothing under test; it
    only lets the dry run execute the run's code). Ids are 32 hex digits, as Keystone's."""

    def __init__(self, auth_url: str, site: int = 1, recorder: Recorder | None = None) -> None:
        super().__init__(auth_url)
        self.site = site
        self.rec = recorder if recorder is not None else RECORDER
        self.store: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in CREATES}
        self.store["domains"]["default"] = {"id": "default", "name": "Default"}
        for coll, names in (("roles", SEED_ROLES), ("users", ("admin",)), ("projects", ("admin",)),
                            ("services", ("keystone",))):
            for n in names:
                rid = uuid.uuid4().hex
                extra = {"type": "identity"} if coll == "services" else {}
                self.store[coll][rid] = {"id": rid, "name": n, **extra}

    async def close(self) -> None:
        return None

    async def call(self, method: str, path: str, token: str | None = None, body: object = None,
                   headers: dict[str, str] | None = None, base: str | None = None,
                   ok: tuple[int, ...] = ()) -> tuple[int, Any, Any]:
        full = urlsplit(base or self.v3).path.rstrip("/") + path if path != "/" else "/"
        status, data, hdrs = self._answer(method, full, body)
        self.rec.calls.append((self.rec.phase, template(method, full), status))
        if not (200 <= status < 300 or status in ok):
            raise KeystoneError(status, method, path, "simulated")
        return status, data, hdrs

    def _answer(self, method: str, full: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(full)
        segs = [s for s in parts.path.split("/") if s]
        if not segs:
            return 300, {"versions": {"values": []}}, {}
        if segs == ["v3"]:
            return 200, {"version": {"id": "v3.14", "status": "stable"}}, {}
        rest = segs[1:]
        if rest == ["auth", "tokens"]:
            return self._token(method, body)
        coll = rest[0]
        store = self.store.get(coll)
        if rest[0] == "role_assignments":
            return 200, {"role_assignments": []}, {}
        if store is None:
            return 404, None, {}
        if len(rest) == 1:
            if method == "POST":
                key = CREATES[coll]
                fields = (json.loads(body) if isinstance(body, bytes) else body or {}).get(key, {})
                rid = uuid.uuid4().hex
                store[rid] = {**{k: v for k, v in fields.items() if k != "password"}, "id": rid}
                return 201, {key: store[rid]}, {}
            query = dict(parse_qsl(parts.query))
            items = [r for r in store.values() if "name" not in query or r.get("name") == query["name"]]
            return 200, {coll: items}, {}
        rid = rest[1]
        item = store.get(rid)  # ids are exact: GET /v3/domains/Default is a 404 (then Rally lists by name)
        if len(rest) > 2:  # /projects/{p}/users/{u}/roles[/{r}]
            if method == "GET":
                return 200, {"roles": list(self.store["roles"].values())[:1]}, {}
            return 204, None, {}
        if item is None:
            return 404, None, {}
        if method == "GET":
            return 200, {CREATES[coll]: item}, {}
        if method == "PATCH":
            fields = (json.loads(body) if isinstance(body, bytes) else body or {}).get(CREATES[coll], {})
            item.update({k: v for k, v in fields.items() if k != "password"})
            return 200, {CREATES[coll]: item}, {}
        if method == "DELETE":
            del store[item["id"]]
            return 204, None, {}
        return 405, None, {}

    def _token(self, method: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        if method == "GET":
            return 200, {"token": {"user": {"id": "x"}}}, {}
        auth = json.loads(body) if isinstance(body, bytes) else body
        name = auth["auth"]["identity"]["password"]["user"]["name"]
        user = next((u for u in self.store["users"].values() if u.get("name") == name),
                    {"id": uuid.uuid4().hex})
        scope = auth["auth"].get("scope", {}).get("project")
        token = {"user": {"id": user["id"], "name": name}, "expires_at": "2999-01-01T00:00:00.000000Z",
                 "project": {"id": uuid.uuid4().hex, "name": scope["name"]} if scope else None,
                 "catalog": [{"type": "identity", "name": "keystone", "endpoints": [
                     {"interface": "public", "region": "RegionOne", "url": self.v3}]}]}
        return 201, {"token": token}, {"X-Subject-Token": uuid.uuid4().hex}


def table(counts: Counter[str]) -> list[tuple[str, int]]:
    """Rows (call, count), the most frequent first, then by name."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def merge(counters: Iterable[Counter[str]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in counters:
        out.update(c)
    return out
