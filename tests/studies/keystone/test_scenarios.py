"""Keystone scenarios: names and arguments (pure), then each of the seven run for a few
iterations against the real Keystone 30 (lab, 1 site, 0 ms, MariaDB, memcached) from inside the
site's namespace, with a tiny setup -> run x N -> cleanup loop standing in for the engine."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from juice.errors import UserError
from juice.lab import LocalLab, spec
from juice.lab.setns import in_site
from juice.load.api import AtomicAction, Clock, DictEnv, Iteration
from juice.openstack.http import issue_token, request
from juice.openstack.keystone import Credentials, KeystoneError
from juice.services import kinds as services
from juice.services.openstack.keystone import Keystone, KeystoneOptions
from juice.studies.keystone import catalog as registry
from juice.studies.keystone.env import AdminCredentials, KeystoneEnv
from juice.studies.keystone.names import legacy_name
from tests.services.conftest import needs_lab, services_capable

ITERATIONS = 3
SHORT = {
    "authenticate_user_and_validate_token": ["fetch_token", "validate_token"],
    "create_add_and_list_user_roles": ["create_role", "add_role", "list_roles"],
    "create_and_list_tenants": ["create_project", "list_projects"],
    "get_entities": ["create_project", ("create_user", ["list_roles", "add_role"]), "create_role",
                     "get_project", "get_user", "get_role", "list_services", "get_services"],
    "create_user_update_password": ["create_user", "update_user"],
    "create_user_set_enabled_and_delete": ["create_user", "update_user", "delete_user"],
    "create_and_list_users": ["create_user", "list_users"],
}


def _expected(short: list[Any]) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for a in short:
        name, kids = (a, []) if isinstance(a, str) else a
        out.append(("keystone_v3." + name, _expected(kids)))
    return out


def _tree(actions: list[AtomicAction]) -> list[tuple[str, list[Any]]]:
    return [(a.name, _tree(a.children)) for a in actions]


# ---- pure -----------------------------------------------------------------------------------

def test_registry_accepts_rally_bare_and_new_style_names() -> None:
    assert len(registry.names()) == 7
    for op in SHORT:
        full = f"KeystoneBasic.{op}"
        assert full in registry.names()
        assert registry.canonical(op) == registry.canonical(f"keystone.{op}") == full
        assert registry.canonical(full) == full
        assert registry.get(op, {}).name == full


def test_unknown_scenario_or_argument_is_a_user_error_listing_choices() -> None:
    with pytest.raises(UserError, match="KeystoneBasic.create_and_list_users"):
        registry.get("KeystoneBasic.create_usr", {})
    with pytest.raises(UserError, match="service_name"):
        registry.get("get_entities", {"servce_name": "x"})
    with pytest.raises(UserError, match="session"):
        registry.get("get_entities", {"session": "pooled"})
    with pytest.raises(UserError, match="users_per_tenant"):
        registry.get("get_entities", {}, contexts={"users": {"users_per_tenant": 0}})
    # Rally's deprecated arguments are accepted and ignored.
    registry.get("create_user_update_password", {"name_length": 10, "password_length": 10})


def test_legacy_action_names() -> None:
    assert legacy_name("keystone.create_user") == "keystone_v3.create_user"
    assert legacy_name("keystone.get_service") == "keystone_v3.get_services"
    assert legacy_name("keystone_v3.list_users") == "keystone_v3.list_users"
    assert legacy_name("nova.boot_server") == "nova.boot_server"


def test_env_keeps_the_password_out_of_repr_and_public_view() -> None:
    values = {"auth_url": "http://10.0.0.2:5000/v3", "username": "admin", "password": "s3cr3t-pw",
              "project_name": "admin", "concurrency": 4}
    env = KeystoneEnv.from_env(DictEnv(2, values))
    assert env.site == 2 and env.concurrency == 4 and env.get("password") == "s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(env) and "s3cr3t-pw" not in str(env.public())
    assert "s3cr3t-pw" not in repr(Credentials("u", "s3cr3t-pw"))
    with pytest.raises(UserError, match="password"):
        KeystoneEnv.from_env(DictEnv(1, {"auth_url": "http://x/v3", "username": "a", "project_name": "p"}))


# ---- against the real Keystone --------------------------------------------------------------

class Deployed:
    def __init__(self, lab: LocalLab, ks: Keystone) -> None:
        self.lab, self.ks = lab, ks
        self.env = KeystoneEnv.from_keystone(ks, 1, concurrency=2)

    def listing(self, what: str) -> dict[str, str]:
        """id -> name of every user/project/role/service, read with a plain independent client."""
        tok = issue_token(self.lab, 1, self.ks.admin_credentials())
        r = request(self.lab, 1, "GET", f"{self.env.auth_url}/{what}", headers={"X-Auth-Token": tok})
        assert r.status == 200, (r.status, r.body[:200], self.server_errors())
        return {x["id"]: x["name"] for x in r.json()[what]}

    def server_errors(self) -> list[str]:
        """Keystone's own last error lines (gunicorn's "Error handling request" and the
        traceback after it): why it answered an error, shown with a failed assertion."""
        place, path = self.ks.logs()[0]
        lines = (place.read(path) or b"").decode(errors="replace").splitlines()
        hits = [i for i, ln in enumerate(lines) if "ERROR" in ln or "Error handling request" in ln]
        return lines[max(0, hits[-1] - 10):hits[-1] + 30] if hits else lines[-20:]

    def snapshot(self) -> dict[str, dict[str, str]]:
        return {w: self.listing(w) for w in ("users", "projects", "roles", "services")}

    def run(self, name: str, args: dict[str, Any], iterations: int = ITERATIONS,
            spoil_admin: bool = False) -> tuple[list[Iteration], list[BaseException | None],
                                                dict[str, dict[str, str]], dict[str, Any]]:
        """setup -> iterations -> (snapshot) -> cleanup, in site 1's namespace."""
        scenario = registry.get(name, args, seed=7)
        seen: dict[str, Any] = {}

        async def go() -> tuple[list[Iteration], list[BaseException | None]]:
            ctx = await scenario.setup(self.env)
            seen["users"] = [u["id"] for u in ctx["users"]]
            seen["tenants"] = list(ctx["tenants"])
            drv = ctx["keystone"]
            good = drv.admin
            its: list[Iteration] = []
            errs: list[BaseException | None] = []
            clock = Clock()
            try:
                if spoil_admin:
                    drv.admin = Credentials(good.username, "wrong-password", good.project_name)
                for i in range(iterations):
                    it = Iteration(i, 1, ctx, clock)
                    try:
                        await scenario.run(it)
                        errs.append(None)
                    except Exception as e:  # the engine records it; so do we
                        errs.append(e)
                    its.append(it)
                drv.admin = good
                seen["during"] = await asyncio.to_thread(self.snapshot)
            finally:
                drv.admin = good
                await scenario.cleanup(self.env, ctx)
            return its, errs

        its, errs = in_site(self.lab.site_ns(1), lambda: asyncio.run(go()), timeout=300)
        return its, errs, seen.pop("during"), seen


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    reason = services_capable()
    if reason:
        pytest.skip(reason)
    name = "w" + secrets.token_hex(3)
    with LocalLab.up(spec.parse({"name": name, "sites": 1, "delay_ms": 0}), ephemeral=True) as lab, \
            services.deploy(lab, "mariadb") as db:
        ks = Keystone(lab, db, options=KeystoneOptions(cache=True, workers=1, password_hash_rounds=4))
        try:
            ks.up()
            yield Deployed(lab, ks)
        finally:
            ks.stop()


def _owned(listing: dict[str, str], prefix: str = "s_juice_") -> set[str]:
    return {i for i, n in listing.items() if n.startswith(prefix)}


@needs_lab[0]
@needs_lab[1]
@pytest.mark.parametrize("op", list(SHORT))
def test_scenario_against_real_keystone(deployed: Deployed, op: str) -> None:
    before = deployed.snapshot()
    its, errs, during, seen = deployed.run(op, {})
    assert errs == [None] * ITERATIONS
    want = _expected(SHORT[op])
    for it in its:
        assert _tree(it.actions) == want
        assert all(not a.failed and a.finished_ns >= a.started_ns for a in it.actions)

    # The users context: 1 tenant x 1 user, present during the window, gone afterwards.
    assert len(seen["users"]) == 1 and len(seen["tenants"]) == 1
    assert set(seen["users"]) <= set(during["users"]) and set(seen["tenants"]) <= set(during["projects"])
    made = {k: _owned(during[k]) - _owned(before[k]) for k in during}
    made["users"] -= set(seen["users"])
    made["projects"] -= set(seen["tenants"])
    created = {"users": {"get_entities": ITERATIONS, "create_user_update_password": ITERATIONS,
                         "create_and_list_users": ITERATIONS},
               "projects": {"get_entities": ITERATIONS, "create_and_list_tenants": ITERATIONS},
               "roles": {"get_entities": ITERATIONS, "create_add_and_list_user_roles": ITERATIONS}}
    for kind, per_op in created.items():
        assert len(made[kind]) == per_op.get(op, 0), (kind, made[kind])

    after = deployed.snapshot()
    assert after == before  # admin_cleanup + users cleanup removed everything


@needs_lab[0]
@needs_lab[1]
def test_reuse_session_same_actions(deployed: Deployed) -> None:
    its, errs, _, _ = deployed.run("authenticate_user_and_validate_token", {"session": "reuse"}, iterations=2)
    assert errs == [None, None]
    assert all(_tree(it.actions) == _expected(SHORT["authenticate_user_and_validate_token"]) for it in its)


@needs_lab[0]
@needs_lab[1]
def test_rejected_request_fails_the_iteration_and_its_action(deployed: Deployed) -> None:
    before = deployed.snapshot()
    its, errs, _, _ = deployed.run("authenticate_user_and_validate_token", {"session": "reuse"}, iterations=2,
                                   spoil_admin=True)
    for it, err in zip(its, errs, strict=True):
        assert isinstance(err, KeystoneError) and err.status == 401 and err.path == "/auth/tokens"
        assert "wrong-password" not in str(err)
        assert [(a.name, a.failed) for a in it.actions] == [("keystone_v3.fetch_token", True)]
    assert deployed.snapshot() == before


def test_admin_credentials_type_matches_service() -> None:
    c = AdminCredentials("admin", "pw")
    assert c.credentials().project_name == "admin" and "pw" not in repr(c)
