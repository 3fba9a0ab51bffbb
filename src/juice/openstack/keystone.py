"""A small async Keystone v3 client on aiohttp: JSON in and out, one pooled session per driver.

    client = KeystoneClient("http://10.210.1.2:5000/v3", limit=concurrency)
    tok = await client.issue_token(creds)                  # POST /v3/auth/tokens (project scope)
    user = await client.create_user(tok.id, name="u", domain_id="default")
    await client.validate_token(tok.id, tok.id)            # GET /v3/auth/tokens + X-Subject-Token
    await client.close()

Every method is one HTTP request (the scenarios decide the order). A non-2xx answer raises
``KeystoneError(status, method, path, message)``; a transport failure raises aiohttp's own
error. Resource ids in ``path`` are kept (they are not secret); bodies and tokens are never in
an error message. The session is created lazily inside the running loop, with a connection
pool limited to ``limit`` (the driver's concurrency) and keep-alive.

CPU matters (a driver at high concurrency is CPU-bound on 2 cores): bodies are encoded with
``json.dumps`` once, responses read as bytes and decoded with ``json.loads``, no per-request
objects beyond aiohttp's own, no response validation beyond the status.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import quote

import aiohttp
from multidict import CIMultiDictProxy

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class Resource(TypedDict, total=False):
    """A Keystone v3 resource as the API answers it (a project, user, role, domain, service,
    role assignment or token): the fields Juice reads; the others are there, untyped."""

    id: str
    name: str
    domain_id: str | None
    enabled: bool
    description: str | None
    type: str
    default_project_id: str | None
    expires_at: str


class KeystoneError(Exception):
    """Keystone answered with a non-2xx status."""

    def __init__(self, status: int, method: str, path: str, message: str) -> None:
        super().__init__(f"{method} {path} -> {status}: {message}")
        self.status = status
        self.method = method
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Credentials:
    """Password credentials; ``project_name`` None means an unscoped token."""

    username: str
    password: str = field(repr=False)
    project_name: str | None = None
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"

    def auth_body(self) -> bytes:
        auth: dict[str, object] = {"identity": {"methods": ["password"], "password": {"user": {
            "name": self.username, "domain": {"name": self.user_domain_name}, "password": self.password}}}}
        if self.project_name is not None:
            auth["scope"] = {"project": {"name": self.project_name,
                                         "domain": {"name": self.project_domain_name}}}
        return json.dumps({"auth": auth}).encode()


@dataclass(frozen=True)
class Token:
    """An issued token: ``id`` is the X-Subject-Token (secret, left out of ``repr``)."""

    id: str = field(repr=False)
    user_id: str
    project_id: str | None
    expires_at: str


def root_of(auth_url: str) -> str:
    """``http://h:5000/v3/`` -> ``http://h:5000`` (the unversioned endpoint)."""
    url = auth_url.rstrip("/")
    if url.endswith("/v3") or url.endswith("/v2.0"):
        url = url.rsplit("/", 1)[0]
    return url


def _message(raw: bytes) -> str:
    try:
        err = json.loads(raw).get("error", {})
        return str(err.get("message") or err.get("title") or "")[:300]
    except (ValueError, AttributeError):
        return raw[:200].decode("utf-8", "replace")


class RateCap:
    """At most ``rate`` requests per second, ever: each request takes the next slot of a
    grid ``1/rate`` apart (no burst), waiting for it when it is in the future."""

    def __init__(self, rate: float) -> None:
        if not rate > 0:
            raise ValueError(f"rate cap: expected > 0 requests/s, got {rate}")
        self.gap = 1.0 / rate
        self._next = 0.0
        self.waited_s = 0.0

    async def take(self) -> None:
        now = time.monotonic()
        slot = max(now, self._next)
        self._next = slot + self.gap
        if slot > now:
            self.waited_s += slot - now
            await asyncio.sleep(slot - now)


class KeystoneClient:
    """One Keystone site's API (see the module docstring). ``max_rps``: a :class:`RateCap`
    every request goes through (a run against someone else's cloud)."""

    def __init__(self, auth_url: str, limit: int = 10, timeout_s: float = 600.0,
                 max_rps: float | None = None) -> None:
        self.root = root_of(auth_url)
        self.v3 = self.root + "/v3"
        self.limit = max(1, limit)
        self.timeout_s = timeout_s
        self.cap = RateCap(max_rps) if max_rps else None
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            conn = aiohttp.TCPConnector(limit=self.limit, limit_per_host=0, ttl_dns_cache=None,
                                        keepalive_timeout=60.0)
            self._session = aiohttp.ClientSession(
                connector=conn, timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                skip_auto_headers=("User-Agent",), json_serialize=json.dumps)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, path: str, token: str | None = None, body: object = None,
                   headers: dict[str, str] | None = None, base: str | None = None,
                   ok: tuple[int, ...] = ()) -> tuple[int, Any, CIMultiDictProxy[str]]:
        """One request: ``(status, decoded JSON or None, response headers)``. The body is as
        the server sent it (``Any``: each caller reads the fields of its own request, and a
        body without them fails there as a KeyError/TypeError, as it always has).

        2xx (or a status in ``ok``) returns; anything else raises KeystoneError.
        """
        hdrs = dict(JSON_HEADERS)
        if token is not None:
            hdrs["X-Auth-Token"] = token
        if headers:
            hdrs.update(headers)
        data = body if isinstance(body, bytes) else (None if body is None else json.dumps(body).encode())
        if self.cap is not None:
            await self.cap.take()
        async with self.session.request(method, (base or self.v3) + path, data=data, headers=hdrs) as r:
            raw = await r.read()
            status = r.status
            if not (200 <= status < 300 or status in ok):
                raise KeystoneError(status, method, path, _message(raw))
            return status, (json.loads(raw) if raw else None), r.headers

    # -- discovery and tokens -------------------------------------------------------------
    async def discover(self, versioned: bool = True) -> int:
        """GET /v3 (200), or GET / (300 Multiple Choices) when not ``versioned``."""
        if versioned:
            status, _, _ = await self.call("GET", "", base=self.v3)
        else:
            status, _, _ = await self.call("GET", "/", base=self.root, ok=(300,))
        return status

    async def issue_token(self, creds: Credentials) -> Token:
        _, data, headers = await self.call("POST", "/auth/tokens", body=creds.auth_body())
        tok = data["token"]
        project = tok.get("project")
        return Token(id=headers["X-Subject-Token"], user_id=tok["user"]["id"],
                     project_id=project["id"] if project else None, expires_at=tok.get("expires_at", ""))

    async def validate_token(self, token: str, subject: str) -> Resource:
        _, data, _ = await self.call("GET", "/auth/tokens", token, headers={"X-Subject-Token": subject})
        out: Resource = data["token"]
        return out

    # -- generic CRUD ---------------------------------------------------------------------
    async def _create(self, token: str, coll: str, key: str, fields: dict[str, object]) -> Resource:
        _, data, _ = await self.call("POST", f"/{coll}", token,
                                     {key: {k: v for k, v in fields.items() if v is not None}})
        out: Resource = data[key]
        return out

    async def _get(self, token: str, coll: str, key: str, rid: str) -> Resource:
        _, data, _ = await self.call("GET", f"/{coll}/{rid}", token)
        out: Resource = data[key]
        return out

    async def _list(self, token: str, coll: str, query: str = "",
                    key: str | None = None) -> list[Resource]:
        _, data, _ = await self.call("GET", f"/{coll}{query}", token)
        out: list[Resource] = data[key or coll]
        return out

    async def _delete(self, token: str, coll: str, rid: str) -> None:
        await self.call("DELETE", f"/{coll}/{rid}", token)

    # -- domains --------------------------------------------------------------------------
    async def get_domain(self, token: str, domain_id: str) -> Resource:
        return await self._get(token, "domains", "domain", quote(domain_id, safe=""))

    async def list_domains(self, token: str, name: str | None = None) -> list[Resource]:
        return await self._list(token, "domains", f"?name={quote(name, safe='')}" if name else "")

    # -- projects -------------------------------------------------------------------------
    async def create_project(self, token: str, name: str, domain_id: str | None = None,
                             **extra: object) -> Resource:
        body = {"name": name, "domain_id": domain_id, **extra}
        return await self._create(token, "projects", "project", body)

    async def get_project(self, token: str, project_id: str) -> Resource:
        return await self._get(token, "projects", "project", project_id)

    async def list_projects(self, token: str) -> list[Resource]:
        return await self._list(token, "projects")

    async def delete_project(self, token: str, project_id: str) -> None:
        await self._delete(token, "projects", project_id)

    # -- users ----------------------------------------------------------------------------
    async def create_user(self, token: str, name: str, domain_id: str | None = None,
                          password: str | None = None, default_project_id: str | None = None,
                          enabled: bool | None = True) -> Resource:
        return await self._create(token, "users", "user", {
            "name": name, "domain_id": domain_id, "password": password,
            "default_project_id": default_project_id, "enabled": enabled})

    async def get_user(self, token: str, user_id: str) -> Resource:
        return await self._get(token, "users", "user", user_id)

    async def list_users(self, token: str) -> list[Resource]:
        return await self._list(token, "users")

    async def update_user(self, token: str, user_id: str, **fields: object) -> Resource:
        """PATCH only the given, non-None fields (``password=...``, ``enabled=...``)."""
        _, data, _ = await self.call("PATCH", f"/users/{user_id}", token,
                                     {"user": {k: v for k, v in fields.items() if v is not None}})
        out: Resource = data["user"]
        return out

    async def delete_user(self, token: str, user_id: str) -> None:
        await self._delete(token, "users", user_id)

    # -- roles ----------------------------------------------------------------------------
    async def create_role(self, token: str, name: str, domain_id: str | None = None) -> Resource:
        return await self._create(token, "roles", "role", {"name": name, "domain_id": domain_id})

    async def get_role(self, token: str, role_id: str) -> Resource:
        return await self._get(token, "roles", "role", role_id)

    async def list_roles(self, token: str) -> list[Resource]:
        return await self._list(token, "roles")

    async def delete_role(self, token: str, role_id: str) -> None:
        await self._delete(token, "roles", role_id)

    async def grant_role(self, token: str, project_id: str, user_id: str, role_id: str) -> None:
        await self.call("PUT", f"/projects/{project_id}/users/{user_id}/roles/{role_id}", token)

    async def revoke_role(self, token: str, project_id: str, user_id: str, role_id: str) -> None:
        await self.call("DELETE", f"/projects/{project_id}/users/{user_id}/roles/{role_id}", token)

    async def list_user_project_roles(self, token: str, project_id: str,
                                      user_id: str) -> list[Resource]:
        return await self._list(token, f"projects/{project_id}/users/{user_id}/roles", key="roles")

    async def list_role_assignments(self, token: str, user_id: str | None = None,
                                    project_id: str | None = None) -> list[Resource]:
        q = "&".join(f"{k}={v}" for k, v in (("user.id", user_id), ("scope.project.id", project_id)) if v)
        _, data, _ = await self.call("GET", "/role_assignments" + (f"?{q}" if q else ""), token)
        out: list[Resource] = data["role_assignments"]
        return out

    # -- services -------------------------------------------------------------------------
    async def create_service(self, token: str, name: str, type: str, description: str | None = None,
                             enabled: bool = True) -> Resource:
        return await self._create(token, "services", "service",
                                  {"name": name, "type": type, "description": description,
                                   "enabled": enabled})

    async def get_service(self, token: str, service_id: str) -> Resource:
        return await self._get(token, "services", "service", service_id)

    async def list_services(self, token: str) -> list[Resource]:
        return await self._list(token, "services")

    async def delete_service(self, token: str, service_id: str) -> None:
        await self._delete(token, "services", service_id)
