"""The seven Rally ``KeystoneBasic`` scenarios of the Juice study, as rally-openstack 4.1.0 runs
them (traced against a real Keystone 30: every request, in order, per atomic action).

Per iteration, in ``rally`` session mode (the default; see ``identity``). ``P`` = the 8
requests before the first action (admin + context-user client probes: ``GET /v3`` x2,
``POST /v3/auth/tokens``, ``GET /v3``, twice); ``S`` = ``GET /``, ``POST /v3/auth/tokens``,
``GET /`` inside the first admin action; ``D`` = the domain lookup (``GET
/v3/domains/Default``, + ``GET /v3/domains?name=Default`` when that is 404). In ``reuse``
mode P and S vanish and ``fetch_token`` is the POST alone.

=====================================  ===========================================================
scenario (defaults)                    atomic actions [children]  -- requests
=====================================  ===========================================================
authenticate_user_and_validate_token   P; fetch_token -- GET /v3 x2, POST auth/tokens;
                                       validate_token -- S, GET auth/tokens (X-Subject-Token)
create_add_and_list_user_roles         P; create_role -- S, POST roles; add_role -- PUT
                                       projects/{t}/users/{u}/roles/{r} (context user+tenant);
                                       list_roles -- GET projects/{t}/users/{u}/roles
create_and_list_tenants                P; create_project -- S, D, POST projects;
                                       list_projects -- GET projects
get_entities (service_name=keystone)   P; create_project -- S, D, POST projects;
                                       create_user [list_roles, add_role] -- D, POST users,
                                       GET roles, PUT grant member; then GET users/{id} (lazy);
                                       create_role -- POST roles; get_project; get_user; get_role;
                                       list_services -- GET services; get_services -- GET services/{id}
                                       (service_name=None: create_service instead of list_services)
create_user_update_password            P; create_user -- S, D, POST users; GET users/{id} (lazy);
                                       update_user -- PATCH users/{id} {password}
create_user_set_enabled_and_delete     P; create_user (enabled=True) -- S, D, POST users; GET
(enabled=True)                         users/{id}; update_user -- PATCH {enabled: not enabled};
                                       delete_user -- DELETE users/{id}
create_and_list_users                  P; create_user -- S, D, POST users; GET users/{id};
                                       list_users -- GET users
=====================================  ===========================================================

All action names are ``keystone_v3.<op>``. Contexts, as Rally: ``users`` (default 1 tenant x 1
user, ``member`` role) before the window, and after it ``admin_cleanup`` (what the scenario
created) then the ``users`` cleanup. All seven scenarios run as admin, as 4.1.0 does.

Arguments: each scenario's Rally arguments (deprecated ``name_length``/``password_length``
accepted and ignored, as Rally does), plus Juice's ``session`` (``rally`` | ``reuse``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from juice.errors import UserError
from juice.load.api import Context, Env, Iteration
from juice.openstack import contexts
from juice.openstack.identity import MODES, Driver, Identity, Names
from juice.openstack.keystone import KeystoneClient
from juice.studies.keystone.env import KeystoneEnv

CTX_KEY = "keystone"


def make_client(kenv: KeystoneEnv) -> KeystoneClient:
    """The driver's client: HTTP (rate-capped against a target), or the dry run's simulator."""
    if kenv.simulated:
        from juice.studies.keystone.dryrun import SimulatedKeystone

        return SimulatedKeystone(kenv.auth_url, site=kenv.site)
    return KeystoneClient(kenv.auth_url, limit=kenv.concurrency, max_rps=kenv.max_rps)


class KeystoneScenario:
    """Shared lifecycle: setup = client + ``users`` context; cleanup = admin_cleanup + users
    cleanup + client close. Subclasses define ``ARGS`` (name -> default) and ``body``."""

    name: str = ""
    ARGS: ClassVar[dict[str, Any]] = {}
    IGNORED: ClassVar[tuple[str, ...]] = ()
    EXTRA_KWARGS: ClassVar[tuple[str, ...]] = ()  # Rally's **kwargs passed to create_user/project

    def __init__(self, args: dict[str, Any] | None = None, contexts_cfg: dict[str, Any] | None = None,
                 seed: int | None = None) -> None:
        args = dict(args or {})
        self.session = str(args.pop("session", "rally"))
        if self.session not in MODES:
            raise UserError(f"{self.name}.args.session: must be one of {', '.join(MODES)} "
                            f"(got {self.session!r})")
        allowed = set(self.ARGS) | set(self.IGNORED) | set(self.EXTRA_KWARGS)
        bad = sorted(set(args) - allowed)
        if bad:
            raise UserError(f"{self.name}.args: unknown argument(s) {', '.join(bad)} "
                            f"(allowed: {', '.join(sorted(allowed | {'session'})) })")
        self.args = {**self.ARGS, **{k: v for k, v in args.items() if k in self.ARGS}}
        self.kwargs = {k: v for k, v in args.items() if k in self.EXTRA_KWARGS}
        cfg = dict(contexts_cfg or {})
        unknown = sorted(set(cfg) - {"users"})
        if unknown:
            raise UserError(f"{self.name}.contexts: unknown context(s) {', '.join(unknown)} (Keystone "
                            "scenarios take users)")
        self.users_cfg = contexts.users_config(cfg.get("users"))
        self.seed = seed

    async def setup(self, env: Env) -> Context:
        kenv = KeystoneEnv.from_env(env)
        client = make_client(kenv)
        drv = Driver(client=client, admin=kenv.admin.credentials(), mode=self.session,
                     choice=self.users_cfg["user_choice_method"])
        if kenv.name_run:
            drv.names.run = kenv.name_run
        if self.seed is not None:
            drv.rng.seed(self.seed)
            drv.names.rng.seed(self.seed)
        try:
            await contexts.setup_users(drv, self.users_cfg)
        except BaseException:
            await client.close()
            raise
        return {CTX_KEY: drv, "users": drv.users, "tenants": drv.tenants}

    async def run(self, it: Iteration) -> None:
        ident = Identity(it.ctx[CTX_KEY], it)
        await ident.begin()
        await self.body(ident)

    async def body(self, ks: Identity) -> None:
        raise NotImplementedError

    async def cleanup(self, env: Env, ctx: Context) -> None:
        drv: Driver = ctx[CTX_KEY]
        try:
            await contexts.admin_cleanup(drv)
            await contexts.cleanup_users(drv)
        finally:
            await drv.client.close()


class AuthenticateUserAndValidateToken(KeystoneScenario):
    name = "KeystoneBasic.authenticate_user_and_validate_token"

    async def body(self, ks: Identity) -> None:
        token = await ks.fetch_token()
        await ks.validate_token(token)


class CreateAddAndListUserRoles(KeystoneScenario):
    name = "KeystoneBasic.create_add_and_list_user_roles"

    async def body(self, ks: Identity) -> None:
        if ks.user is None:
            raise RuntimeError("create_add_and_list_user_roles needs the users context")
        tenant_id, user_id = ks.user["tenant_id"], ks.user["id"]
        role = await ks.create_role()
        await ks.add_role(role["id"], user_id, tenant_id)
        await ks.list_roles(user_id=user_id, project_id=tenant_id)


class CreateAndListTenants(KeystoneScenario):
    name = "KeystoneBasic.create_and_list_tenants"
    IGNORED = ("name_length",)
    EXTRA_KWARGS = ("project_name", "domain_name")

    async def body(self, ks: Identity) -> None:
        await ks.create_project(**self.kwargs)
        await ks.list_projects()


class GetEntities(KeystoneScenario):
    name = "KeystoneBasic.get_entities"
    ARGS: ClassVar[dict[str, Any]] = {"service_name": "keystone"}

    async def body(self, ks: Identity) -> None:
        project = await ks.create_project()
        user = await ks.create_user(project_id=project["id"])
        role = await ks.create_role()
        await ks.get_project(project["id"])
        await ks.get_user(user["id"])
        await ks.get_role(role["id"])
        name = self.args["service_name"]
        service = await ks.create_service() if name is None else await ks.get_service_by_name(str(name))
        if service is None:
            raise LookupError(f"no service named {name!r} in the catalog")
        await ks.get_service(service["id"])


class CreateUserUpdatePassword(KeystoneScenario):
    name = "KeystoneBasic.create_user_update_password"
    IGNORED = ("name_length", "password_length")

    async def body(self, ks: Identity) -> None:
        user = await ks.create_user()
        await ks.update_user(user["id"], password=ks.drv.names.new())


class CreateUserSetEnabledAndDelete(KeystoneScenario):
    name = "KeystoneBasic.create_user_set_enabled_and_delete"
    ARGS: ClassVar[dict[str, Any]] = {"enabled": True}
    EXTRA_KWARGS = ("username", "password", "project_id", "domain_name", "default_role")

    async def body(self, ks: Identity) -> None:
        enabled = bool(self.args["enabled"])
        user = await ks.create_user(enabled=enabled, **self.kwargs)
        await ks.update_user(user["id"], enabled=not enabled)
        await ks.delete_user(user["id"])


class CreateAndListUsers(KeystoneScenario):
    name = "KeystoneBasic.create_and_list_users"
    IGNORED = ("name_length", "name")  # Rally pops "name"
    EXTRA_KWARGS = ("password", "project_id", "domain_name", "enabled", "default_role")

    async def body(self, ks: Identity) -> None:
        await ks.create_user(**self.kwargs)
        await ks.list_users()


SCENARIOS: tuple[type[KeystoneScenario], ...] = (
    AuthenticateUserAndValidateToken, CreateAddAndListUserRoles, CreateAndListTenants, GetEntities,
    CreateUserUpdatePassword, CreateUserSetEnabledAndDelete, CreateAndListUsers)

__all__ = ["SCENARIOS", "KeystoneScenario", "Names"]
