"""Rally's ``NovaServers.boot_server`` and ``NovaServers.boot_and_delete_server`` on Juice's load
engine, as rally-openstack 4.1.0 runs them (``nova/utils.py``):

- ``nova.boot_server`` (atomic): ``POST /servers`` (``networks: none``, microversion 2.37: the
  first that allows it; env ``network: omit`` sends what rally-openstack 4.1.0 sends instead: no
  ``networks`` at microversion 2.1, nova then asks neutron for the project's networks), a pre-poll pause
  of ``prepoll_s`` (Rally's ``nova_server_boot_prepoll_delay``, 1 s, counted as idle time), then
  ``GET /servers/<id>`` every ``poll_interval_s`` (Rally's 2 s) until ACTIVE; ERROR fails the
  iteration with nova's fault message; ``boot_timeout_s`` (300 s) bounds it.
- ``boot_and_delete_server``: the same, a ``sleep_between(min_sleep, max_sleep)``, then
  ``nova.delete_server`` (atomic): ``DELETE`` and a GET every ``poll_interval_s`` until 404.
- the ``users`` context (Rally's): ``tenants`` projects with ``users_per_tenant`` users each,
  made through Keystone before the window (the Keystone study's context code); iterations
  take the users round robin; cleanup deletes the servers this driver made (by name prefix,
  as Rally's cleanup), then the users and projects.

Every boot is also written, with its client-side times, to ``boots_path`` (JSON lines): the
study joins it with nova's own notifications (no polling grid) after the run. With env
``profiler_key`` (OSProfiler on in the lab's nova) the POST carries OSProfiler's trace headers
and the boot's record its ``trace_id``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import aiohttp

from juice.load.api import Context, Env, Iteration
from juice.openstack import contexts
from juice.openstack.identity import Driver, Names
from juice.openstack.keystone import Credentials, KeystoneClient, RateCap
from juice.openstack.profiler import trace_headers
from juice.util import atomic

MICROVERSION = "2.37"
RALLY_MICROVERSION = "2.1"  # novaclient's default, what rally-openstack 4.1.0 boots with
PREPOLL_S = 1.0
SERVER_PREFIX = "s_juice_"  # server names: s_juice_<run>_<driver>_<iteration> (Rally: s_rally_...)
CTX = "_nova"
T = TypeVar("T")


class NovaError(Exception):
    """nova answered an error status (``status``), or a server went to ERROR (the fault's message)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


BUSY = (502, 503, 504)  # a load balancer's (or a busy API's) "not now"


class NovaApi:
    """A small async client of nova's API (one pooled aiohttp session)."""

    def __init__(self, url: str, limit: int, max_rps: float | None = None,
                 microversion: str = MICROVERSION) -> None:
        self.url = url.rstrip("/")
        self.microversion = microversion
        self.limit = max(1, limit)
        self.cap = RateCap(max_rps) if max_rps else None
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.limit, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=300))
        return self._session

    async def call(self, method: str, path: str, token: str, body: object = None,
                   ok: tuple[int, ...] = (200,), extra: dict[str, str] | None = None) -> tuple[int, Any, str]:
        headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"compute {self.microversion}",
                   "Content-Type": "application/json", "Accept": "application/json", **(extra or {})}
        data = None if body is None else json.dumps(body).encode()
        if self.cap is not None:
            await self.cap.take()
        async with self.session.request(method, self.url + path, data=data, headers=headers) as r:
            raw = await r.read()
            rid = r.headers.get("x-openstack-request-id", "")
            if r.status not in ok:
                text = raw[:300].decode(errors="replace")
                raise NovaError(f"{method} {path.split('?')[0]} -> {r.status}: {text}", status=r.status)
            return r.status, (json.loads(raw) if raw else None), rid

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class NovaScenario:
    """Context, users, the boot atomic and cleanup shared by the two scenarios."""

    name: str = ""
    ARGS: ClassVar[dict[str, object]] = {}

    def __init__(self, args: dict[str, Any] | None = None, contexts_cfg: dict[str, Any] | None = None,
                 seed: int | None = None) -> None:
        self.args = {**self.ARGS, **(args or {})}
        self.users_cfg = contexts.users_config((contexts_cfg or {}).get("users"))
        self.seed = seed

    async def setup(self, env: Env) -> Context:
        conc = int(env.get("concurrency") or 1)
        admin = Credentials(str(env.get("username")), str(env.get("password")), str(env.get("project_name")),
                            str(env.get("user_domain_name") or "Default"),
                            str(env.get("project_domain_name") or "Default"))
        # a target's rate cap: half for Keystone (the context), half for nova, never more in all
        rps = float(env.get("max_rps")) / 2 if env.get("max_rps") else None
        ks = KeystoneClient(str(env.get("auth_url")), limit=min(conc, 20), max_rps=rps)
        drv = Driver(client=ks, admin=admin, mode="reuse", names=Names(run=str(env.get("name_run"))))
        omit = str(env.get("network") or "none") == "omit"
        nova = NovaApi(str(env.get("nova_url")), conc, max_rps=rps,
                       microversion=RALLY_MICROVERSION if omit else MICROVERSION)
        state: dict[str, object] = {"ks": ks, "drv": drv, "nova": nova, "boots": [], "env": env,
                                 "prefix": f"{SERVER_PREFIX}{env.get('name_run')}_{env.site}",
                                 "poll": float(env.get("poll_interval_s") or 2.0),
                                 "prepoll": float(env.get("prepoll_s") if env.get("prepoll_s") is not None
                                                  else PREPOLL_S),
                                 "timeout": float(env.get("boot_timeout_s") or 300.0)}
        try:
            await contexts.setup_users(drv, self.users_cfg)
            state["tokens"] = [(await ks.issue_token(u["credentials"])).id for u in drv.users]
            state["admin_token"] = await drv.admin_token()
        except BaseException:
            await self._close(state)
            raise
        return {CTX: state}

    async def run(self, it: Iteration) -> None:
        st = it.ctx[CTX]
        await self.boot(it, st)

    async def boot(self, it: Iteration, st: dict[str, Any]) -> str:
        env = st["env"]
        token = st["tokens"][it.index % len(st["tokens"])]
        rec: dict[str, object] = {"index": it.index, "name": f"{st['prefix']}_{it.index:06d}"}
        st["boots"].append(rec)
        network = str(env.get("network") or "none")
        body: dict[str, Any] = {"server": {"name": rec["name"], "flavorRef": env.get("flavor_id"),
                                           "imageRef": env.get("image_id")}}
        if network != "omit":  # omit: Rally 4.1.0's request (no networks, microversion 2.1)
            body["server"]["networks"] = network if network in ("none", "auto") else [{"uuid": network}]
        trace: dict[str, str] = {}
        if env.get("profiler_key"):  # OSProfiler on: this boot is a trace of its own
            rec["trace_id"], trace = trace_headers(str(env.get("profiler_key")))
        with it.atomic("nova.boot_server"):
            rec["t_post"] = time.time()
            _, data, rid = await st["nova"].call("POST", "/servers", token, body, ok=(202,), extra=trace)
            rec["t_accepted"], rec["id"], rec["request_id"] = time.time(), data["server"]["id"], rid
            await it.sleep_between(st["prepoll"])
            deadline = time.monotonic() + st["timeout"]
            polls = 0
            while True:
                _, srv, _ = await st["nova"].call("GET", f"/servers/{rec['id']}", token)
                polls += 1
                status = srv["server"]["status"]
                if status == "ACTIVE":
                    rec.update(t_active_seen=time.time(), status="ACTIVE", polls=polls,
                               host=srv["server"].get("OS-EXT-SRV-ATTR:hypervisor_hostname"))
                    break
                if status == "ERROR":
                    fault = (srv["server"].get("fault") or {}).get("message", "no fault recorded")
                    rec.update(t_error_seen=time.time(), status="ERROR", fault=fault, polls=polls)
                    raise NovaError(f"server {rec['id']} went to ERROR: {fault}")
                if time.monotonic() > deadline:
                    rec.update(status=f"timeout:{status}", polls=polls)
                    raise TimeoutError(f"server {rec['id']} not ACTIVE after {st['timeout']:.0f} s "
                                       f"(status {status})")
                await asyncio.sleep(st["poll"])
        return str(rec["id"])

    async def delete(self, it: Iteration, st: dict[str, Any], sid: str) -> None:
        token = st["tokens"][it.index % len(st["tokens"])]
        with it.atomic("nova.delete_server"):
            await st["nova"].call("DELETE", f"/servers/{sid}", token, ok=(204,))
            deadline = time.monotonic() + st["timeout"]
            while True:
                status, _, _ = await st["nova"].call("GET", f"/servers/{sid}", token, ok=(200, 404))
                if status == 404:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"server {sid} still there {st['timeout']:.0f} s after DELETE")
                await asyncio.sleep(st["poll"])
        for rec in st["boots"]:
            if rec.get("id") == sid:
                rec["deleted"] = True

    async def cleanup(self, env: Env, ctx: Context) -> None:
        st = ctx[CTX]
        try:
            # the boots' records first: a cleanup that fails (an API behind a full load
            # balancer answering 504) must not lose what the window measured
            path = env.get("boots_path")
            if path:
                atomic.write_text(Path(str(path)),
                                  "".join(json.dumps(b) + "\n" for b in st["boots"]))
            # what the window left, before the cleanup deletes it: the invariants' evidence
            # (juice.studies.nova.invariants: stuck servers, each ACTIVE one's allocation)
            servers_path = env.get("servers_path")
            if servers_path:
                try:
                    rows = await snapshot(st["nova"], st["admin_token"], st["prefix"],
                                          str(env.get("placement_url") or ""))
                except (NovaError, aiohttp.ClientError, TimeoutError) as e:
                    rows = [{"error": str(e)[:300]}]
                atomic.write_text(Path(str(servers_path)), "".join(json.dumps(r) + "\n" for r in rows))
            await delete_by_prefix(st["nova"], st["admin_token"], st["prefix"], st["timeout"])
            await contexts.cleanup_users(st["drv"])
        finally:
            await self._close(st)

    async def _close(self, st: dict[str, Any]) -> None:
        await st["nova"].close()
        await st["ks"].close()


async def when_answered(fn: Callable[[], Awaitable[T]], deadline: float, first_wait_s: float = 2.0) -> T:
    """``fn()``, again while the API (or the load balancer in front of it) answers 502/503/504 or
    does not answer, until ``deadline`` (monotonic): right after a heavy run the API is still
    working through its queue, and a cleanup must not give up on it at once. Waits double from
    ``first_wait_s`` up to 30 s; any other error, or the deadline, raises the last error."""
    wait = first_wait_s
    for _ in range(1000):
        try:
            return await fn()
        except (NovaError, aiohttp.ClientError, TimeoutError) as e:
            busy = not isinstance(e, NovaError) or e.status in BUSY
            if not busy or time.monotonic() + wait > deadline:
                raise
        await asyncio.sleep(wait)
        wait = min(30.0, wait * 2)
    return await fn()


SNAPSHOT_MAX = 500  # servers whose placement allocations are read at the end of a window
PLACEMENT_MICROVERSION = "placement 1.28"


async def snapshot(nova: NovaApi, token: str, prefix: str,
                   placement_url: str = "") -> list[dict[str, object]]:
    """The servers named ``prefix``* (every project) as the window left them: status, task and VM
    state, host, flavor, and (when ``placement_url`` is given, for the first ``SNAPSHOT_MAX``)
    placement's allocations for each, by resource provider. One row per server; a row
    ``{"truncated": n}`` says how many were not asked for their allocations."""
    _, data, _ = await nova.call("GET", f"/servers/detail?all_tenants=1&name=^{prefix}", token)
    rows: list[dict[str, object]] = []
    for s in data.get("servers", []):
        if not str(s.get("name", "")).startswith(prefix):
            continue
        flavor = s.get("flavor") or {}
        rows.append({"id": s.get("id"), "name": s.get("name"), "status": s.get("status"),
                     "task_state": s.get("OS-EXT-STS:task_state"), "vm_state": s.get("OS-EXT-STS:vm_state"),
                     "host": s.get("OS-EXT-SRV-ATTR:hypervisor_hostname"),
                     "flavor": {k: flavor.get(k) for k in ("vcpus", "ram", "disk", "original_name")}})
    if not placement_url:
        return rows
    base = placement_url.rstrip("/")
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": PLACEMENT_MICROVERSION,
               "Accept": "application/json"}
    for row in rows[:SNAPSHOT_MAX]:
        async with nova.session.get(f"{base}/allocations/{row['id']}", headers=headers) as r:
            body = await r.json(content_type=None) if r.status == 200 else {}
        allocs = (body or {}).get("allocations") or {}
        row["allocations"] = {rp: (a or {}).get("resources", {}) for rp, a in allocs.items()}
    if len(rows) > SNAPSHOT_MAX:
        rows.append({"truncated": len(rows) - SNAPSHOT_MAX})
    return rows


async def delete_by_prefix(nova: NovaApi, token: str, prefix: str, timeout_s: float) -> int:
    """Delete every server (all projects) whose name starts with ``prefix``; wait until gone
    (within ``timeout_s``, a busy API's 502/503/504 retried: ``when_answered``)."""
    deadline = time.monotonic() + timeout_s

    async def listed() -> list[str]:
        _, data, _ = await nova.call("GET", f"/servers?all_tenants=1&name=^{prefix}", token)
        return [s["id"] for s in data["servers"] if s["name"].startswith(prefix)]

    ids = await when_answered(listed, deadline)
    for sid in ids:
        await when_answered(partial(nova.call, "DELETE", f"/servers/{sid}", token, ok=(204, 404)), deadline)
    while ids and time.monotonic() < deadline:
        ids = await when_answered(listed, deadline)
        if ids:
            await asyncio.sleep(1.0)
    return len(ids)


class BootServer(NovaScenario):
    name = "NovaServers.boot_server"


class BootAndDeleteServer(NovaScenario):
    name = "NovaServers.boot_and_delete_server"
    ARGS: ClassVar[dict[str, Any]] = {"min_sleep": 0.0, "max_sleep": 0.0, "force_delete": False}

    async def run(self, it: Iteration) -> None:
        st = it.ctx[CTX]
        sid = await self.boot(it, st)
        if self.args["max_sleep"]:
            await it.sleep_between(float(self.args["min_sleep"]), float(self.args["max_sleep"]))
        await self.delete(it, st, sid)


SCENARIOS: dict[str, type[NovaScenario]] = {c.name: c for c in (BootServer, BootAndDeleteServer)}


def get(name: str, args: dict[str, object], contexts_cfg: dict[str, object] | None,
        seed: int | None) -> NovaScenario:
    return SCENARIOS[name](args, contexts_cfg, seed)
