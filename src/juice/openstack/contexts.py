"""Rally's contexts for the Keystone scenarios, before and after the measured window.

``users`` (rally-openstack 4.1.0 ``UserGenerator``): ``tenants`` projects, then
``users_per_tenant`` users in each, every user created through the service layer (domain
lookup, POST, ``GET /v3/roles``, grant of ``member`` on its project, lazy GET), with a random
UUID password unless ``user_password`` is given; at most ``resource_management_workers``
(Rally's default 20, capped by the count) at once. Cleanup deletes the users, then the projects.

``admin_cleanup`` (the scenarios' ``admin_cleanup@openstack: [keystone]``): after the window,
list users, projects, services and roles and delete those this driver's scenario created
(name prefix ``s_juice_<run>_``), context users and projects excepted (the ``users`` cleanup
removes them).

Context work is not timed and not recorded; it uses the driver's cached admin token.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import TypedDict, TypeVar

from juice.errors import UserError
from juice.openstack.identity import DEFAULT_ROLE, ContextUser, Driver, Identity
from juice.openstack.keystone import Credentials, KeystoneError, Resource

T = TypeVar("T")


class UsersConfig(TypedDict):
    """Rally's ``users`` context config, validated, with its defaults."""

    tenants: int
    users_per_tenant: int
    resource_management_workers: int
    user_password: str | None
    user_choice_method: str
    project_domain: str | None
    user_domain: str | None


USERS_DEFAULTS: UsersConfig = {"tenants": 1, "users_per_tenant": 1, "resource_management_workers": 20,
                                  "user_password": None, "user_choice_method": "random",
                                  "project_domain": None, "user_domain": None}


def users_config(cfg: Mapping[str, object] | None) -> UsersConfig:
    """Rally's ``users`` context config with its defaults; UserError on a bad key or value."""
    given = dict(cfg or {})
    bad = sorted(set(given) - set(USERS_DEFAULTS))
    if bad:
        raise UserError(f"contexts.users: unknown key(s) {', '.join(bad)} "
                        f"(allowed: {', '.join(USERS_DEFAULTS)})")
    out: dict[str, object] = {**USERS_DEFAULTS, **given}

    def count(k: str) -> int:
        v = out[k]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise UserError(f"contexts.users.{k}: must be an integer >= 1 (got {v!r})")
        return v

    def text(k: str) -> str | None:
        v = out[k]
        return None if v is None else str(v)

    method = out["user_choice_method"]
    n = count("tenants"), count("users_per_tenant"), count("resource_management_workers")
    if method not in ("random", "round_robin"):
        raise UserError("contexts.users.user_choice_method: must be random or round_robin")
    return UsersConfig(tenants=n[0], users_per_tenant=n[1], resource_management_workers=n[2],
                       user_password=text("user_password"), user_choice_method=str(method),
                       project_domain=text("project_domain"), user_domain=text("user_domain"))


async def _bounded(workers: int, jobs: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    sem = asyncio.Semaphore(workers)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with sem:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def setup_users(drv: Driver, cfg: UsersConfig) -> None:
    """Create the context's tenants and users into ``drv.tenants`` / ``drv.users``.

    On a failure, what was created is deleted before the error propagates.
    """
    ident = Identity(drv, None, mode="reuse")
    pdom = cfg["project_domain"] or drv.admin.project_domain_name
    udom = cfg["user_domain"] or drv.admin.user_domain_name
    try:
        n = cfg["tenants"]
        projects = await _bounded(min(cfg["resource_management_workers"], n),
                                  [lambda: ident.create_project(domain_name=pdom)] * n)
        for p in projects:
            drv.tenants[p["id"]] = {"id": p["id"], "name": p["name"], "users": []}

        async def user(tid: str) -> None:
            name = drv.names.new()
            password = cfg["user_password"] or str(uuid.uuid4())
            u = await ident.create_user(name, password=password, project_id=tid, domain_name=udom,
                                        default_role=DEFAULT_ROLE)
            entry: ContextUser = {"id": u["id"], "name": name, "tenant_id": tid,
                     "credentials": Credentials(name, password, drv.tenants[tid]["name"], udom, pdom)}
            drv.users.append(entry)
            drv.tenants[tid]["users"].append(entry)

        jobs = [partial(user, tid) for tid in list(drv.tenants) for _ in range(cfg["users_per_tenant"])]
        await _bounded(min(cfg["resource_management_workers"], len(jobs)), jobs)
    except BaseException:
        await cleanup_users(drv)
        raise


async def _quiet_delete(fn: Callable[[str, str], Awaitable[None]], tok: str, rid: str) -> None:
    try:
        await fn(tok, rid)
    except KeystoneError as e:
        if e.status != 404:
            raise


async def cleanup_users(drv: Driver, workers: int = 20) -> None:
    """Delete the context's users, then its projects (a 404 counts as deleted)."""
    tok = await drv.admin_token()
    c = drv.client
    await _bounded(workers, [partial(_quiet_delete, c.delete_user, tok, u["id"]) for u in drv.users])
    drv.users.clear()
    await _bounded(workers, [partial(_quiet_delete, c.delete_project, tok, t) for t in drv.tenants])
    drv.tenants.clear()


async def admin_cleanup(drv: Driver, workers: int = 20,
                        owns: Callable[[str | None], bool] | None = None) -> dict[str, int]:
    """Delete what the scenario created (by name prefix: ``owns``, default the driver's own
    names); returns the count per kind."""
    mine = owns or drv.names.owns
    c = drv.client
    tok = await drv.admin_token()
    keep = {u["id"] for u in drv.users} | set(drv.tenants)
    kinds: list[tuple[str, Callable[[str], Awaitable[list[Resource]]],
                      Callable[[str, str], Awaitable[None]]]] = [
        ("users", c.list_users, c.delete_user), ("projects", c.list_projects, c.delete_project),
        ("services", c.list_services, c.delete_service), ("roles", c.list_roles, c.delete_role)]
    counts: dict[str, int] = {}
    for kind, lister, deleter in kinds:
        doomed = [r["id"] for r in await lister(tok) if mine(r.get("name")) and r["id"] not in keep]
        await _bounded(workers, [partial(_quiet_delete, deleter, tok, i) for i in doomed])
        counts[kind] = len(doomed)
    return counts
