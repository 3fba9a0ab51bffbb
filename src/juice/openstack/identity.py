"""Rally's identity service layer (rally-openstack 4.1.0 ``KeystoneV3Service`` + its unified
wrapper), on the async client: the same HTTP requests, in the same order, inside the same
atomic actions.

What 4.1.0 does beyond the one obvious request, and that is mirrored here:

- ``create_project``/``create_user`` look the domain up first: ``GET /v3/domains/Default``
  and, when that is 404 (as Keystone 30 on MariaDB 10.11 answers here: the id is `default`),
  ``GET /v3/domains?name=Default``. No caching: every call looks again.
- ``create_user`` with a project also runs ``list_roles`` (``GET /v3/roles``) and ``add_role``
  (``PUT .../roles/{member}``) as *child* atomic actions of ``keystone_v3.create_user``.
- After every ``create_user``, the unified wrapper reads ``user.project_id``, an attribute the
  POST answer lacks, so keystoneclient lazily ``GET /v3/users/{id}`` -- outside any atomic
  action, but inside the iteration.
- ``get_service`` is timed as ``keystone_v3.get_services`` (sic); ``get_service_by_name`` is a
  timed ``list_services`` then a client-side filter.

Client sessions (``mode``):

- ``"rally"`` (default): what osclients does per iteration, since every iteration builds new
  ``Clients``. Before the first action (outside atomics): the admin ``Identity`` probe
  (``GET /v3`` x2, ``POST /v3/auth/tokens`` as admin, ``GET /v3``) then the same for the
  iteration's context user. Inside the first atomic action that talks to Keystone as admin:
  ``GET /``, ``POST /v3/auth/tokens`` (admin), ``GET /`` (keystoneclient's v3 session).
  ``fetch_token`` = ``GET /v3`` x2 + ``POST /v3/auth/tokens`` (a fresh ``Clients``).
- ``"reuse"``: one admin token per driver (re-issued 5 min before it expires); only the API
  calls themselves. ``fetch_token`` = the POST alone.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import string
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict

from juice.load.api import Iteration
from juice.openstack.keystone import Credentials, KeystoneClient, KeystoneError, Resource, Token

MODES = ("rally", "reuse")
DEFAULT_ROLE = "member"  # Rally's [openstack] keystone_default_role
NAME_ALPHABET = string.ascii_letters + string.digits
RENEW_BEFORE_S = 300.0


def _expiry(tok: Token) -> float:
    try:
        return datetime.fromisoformat(tok.expires_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time() + 3600.0



class ContextUser(TypedDict):
    """A user of Rally's ``users`` context (``juice.openstack.contexts.setup_users``)."""

    id: str
    name: str
    tenant_id: str
    credentials: Credentials


class ContextTenant(TypedDict):
    """A tenant (project) of the ``users`` context and its users."""

    id: str
    name: str
    users: list[ContextUser]

@dataclass
class Names:
    """Rally-shaped random names: ``s_juice_<run>_<rand>`` (as long as ``s_rally_...``)."""

    run: str = field(default_factory=lambda: "".join(secrets.choice(NAME_ALPHABET) for _ in range(8)))
    rng: random.Random = field(default_factory=random.Random)

    @property
    def prefix(self) -> str:
        return f"s_juice_{self.run}_"

    def new(self) -> str:
        return self.prefix + "".join(self.rng.choices(NAME_ALPHABET, k=8))

    def owns(self, name: str | None) -> bool:
        return bool(name) and str(name).startswith(self.prefix)


@dataclass
class Driver:
    """Per-driver state shared by every iteration: client, admin credentials, names, context."""

    client: KeystoneClient
    admin: Credentials
    mode: str = "rally"
    choice: str = "random"  # Rally's user_choice_method: random | round_robin
    names: Names = field(default_factory=Names)
    rng: random.Random = field(default_factory=random.Random)
    users: list[ContextUser] = field(default_factory=list)  # the users context's users
    tenants: dict[str, ContextTenant] = field(default_factory=dict)  # id -> its tenant
    _token: Token | None = None
    _expires: float = 0.0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def admin_token(self) -> str:
        """The driver's cached admin token (``reuse`` mode, contexts, cleanup)."""
        if self._token is None or time.time() > self._expires - RENEW_BEFORE_S:
            async with self._lock:
                if self._token is None or time.time() > self._expires - RENEW_BEFORE_S:
                    tok = await self.client.issue_token(self.admin)
                    self._token, self._expires = tok, _expiry(tok)
        assert self._token is not None
        return self._token.id

    def choose_user(self, index: int) -> ContextUser | None:
        if not self.users:
            return None
        if self.choice == "round_robin":
            return self.users[index % len(self.users)]
        return self.rng.choice(self.users)


class Identity:
    """One iteration's (or a context's) view of Keystone, as Rally's ``admin_keystone``."""

    def __init__(self, drv: Driver, it: Iteration | None = None, mode: str | None = None) -> None:
        self.drv = drv
        self.c = drv.client
        self.it = it
        self.mode = mode or drv.mode
        self.user = drv.choose_user(it.index) if it is not None else None
        self._admin: str | None = None

    @contextmanager
    def atomic(self, name: str) -> Iterator[None]:
        if self.it is None:
            yield
        else:
            with self.it.atomic(name):
                yield

    async def begin(self) -> None:
        """Rally's per-iteration client construction (``rally`` mode; outside atomics)."""
        if self.mode != "rally":
            return
        await self._probe(self.drv.admin)
        if self.user is not None:
            await self._probe(self.user["credentials"])

    async def _probe(self, creds: Credentials) -> None:
        await self.c.discover()
        await self.c.discover()
        await self.c.issue_token(creds)
        await self.c.discover()

    async def token(self) -> str:
        """The admin token for API calls (``rally``: a new v3 session once per iteration)."""
        if self._admin is None:
            if self.mode == "rally" and self.it is not None:
                await self.c.discover(versioned=False)
                self._admin = (await self.c.issue_token(self.drv.admin)).id
                await self.c.discover(versioned=False)
            else:
                self._admin = await self.drv.admin_token()
        return self._admin

    async def _domain_id(self, tok: str, name: str) -> str:
        try:
            return str((await self.c.get_domain(tok, name))["id"])
        except KeystoneError as e:
            if e.status != 404:
                raise
        found = await self.c.list_domains(tok, name=name)
        if not found:
            raise KeystoneError(404, "GET", "/domains", f"domain {name!r} not found by id nor name")
        return str(found[0]["id"])

    # -- tokens -----------------------------------------------------------------------------
    async def fetch_token(self) -> str:
        with self.atomic("keystone_v3.fetch_token"):
            if self.mode == "rally":
                await self.c.discover()
                await self.c.discover()
            return (await self.c.issue_token(self.drv.admin)).id

    async def validate_token(self, subject: str) -> None:
        with self.atomic("keystone_v3.validate_token"):
            await self.c.validate_token(await self.token(), subject)

    # -- projects ---------------------------------------------------------------------------
    async def create_project(self, project_name: str | None = None,
                             domain_name: str = "Default") -> Resource:
        with self.atomic("keystone_v3.create_project"):
            tok = await self.token()
            dom = await self._domain_id(tok, domain_name)
            return await self.c.create_project(tok, project_name or self.drv.names.new(), dom)

    async def list_projects(self) -> list[Resource]:
        with self.atomic("keystone_v3.list_projects"):
            return await self.c.list_projects(await self.token())

    async def get_project(self, project_id: str) -> Resource:
        with self.atomic("keystone_v3.get_project"):
            return await self.c.get_project(await self.token(), project_id)

    # -- users ------------------------------------------------------------------------------
    async def create_user(self, username: str | None = None, password: str | None = None,
                          project_id: str | None = None, domain_name: str = "Default", enabled: bool = True,
                          default_role: str = DEFAULT_ROLE) -> Resource:
        with self.atomic("keystone_v3.create_user"):
            tok = await self.token()
            dom = await self._domain_id(tok, domain_name)
            user = await self.c.create_user(tok, username or self.drv.names.new(), dom, password=password,
                                            default_project_id=project_id, enabled=enabled)
            if project_id:
                roles = await self.list_roles()
                role = next((r for r in roles if r["name"].lower() == default_role), None) or next(
                    (r for r in roles if r["name"].lower().strip("_") == default_role), None)
                if role is not None:
                    await self.add_role(role["id"], user["id"], project_id)
        await self.c.get_user(tok, user["id"])  # keystoneclient's lazy load of user.project_id
        return user

    async def get_user(self, user_id: str) -> Resource:
        with self.atomic("keystone_v3.get_user"):
            return await self.c.get_user(await self.token(), user_id)

    async def list_users(self) -> list[Resource]:
        with self.atomic("keystone_v3.list_users"):
            return await self.c.list_users(await self.token())

    async def update_user(self, user_id: str, **fields: object) -> None:
        with self.atomic("keystone_v3.update_user"):
            await self.c.update_user(await self.token(), user_id, **fields)

    async def delete_user(self, user_id: str) -> None:
        with self.atomic("keystone_v3.delete_user"):
            await self.c.delete_user(await self.token(), user_id)

    # -- roles ------------------------------------------------------------------------------
    async def create_role(self, name: str | None = None) -> Resource:
        with self.atomic("keystone_v3.create_role"):
            return await self.c.create_role(await self.token(), name or self.drv.names.new())

    async def get_role(self, role_id: str) -> Resource:
        with self.atomic("keystone_v3.get_role"):
            return await self.c.get_role(await self.token(), role_id)

    async def add_role(self, role_id: str, user_id: str, project_id: str) -> None:
        with self.atomic("keystone_v3.add_role"):
            await self.c.grant_role(await self.token(), project_id, user_id, role_id)

    async def list_roles(self, user_id: str | None = None,
                         project_id: str | None = None) -> list[Resource]:
        with self.atomic("keystone_v3.list_roles"):
            tok = await self.token()
            if user_id and project_id:
                return await self.c.list_user_project_roles(tok, project_id, user_id)
            return await self.c.list_roles(tok)

    # -- services ---------------------------------------------------------------------------
    async def create_service(self, name: str | None = None, service_type: str | None = None,
                             description: str | None = None) -> Resource:
        with self.atomic("keystone_v3.create_service"):
            return await self.c.create_service(await self.token(), name or self.drv.names.new(),
                                               service_type or "rally_test_type",
                                               description or self.drv.names.new())

    async def list_services(self) -> list[Resource]:
        with self.atomic("keystone_v3.list_services"):
            return await self.c.list_services(await self.token())

    async def get_service_by_name(self, name: str) -> Resource | None:
        return next((s for s in await self.list_services() if s.get("name") == name), None)

    async def get_service(self, service_id: str) -> Resource:
        with self.atomic("keystone_v3.get_services"):
            return await self.c.get_service(await self.token(), service_id)
