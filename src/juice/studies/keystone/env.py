"""``KeystoneEnv``: what a Keystone scenario receives (an ``api.Env``): the driver's site, the
auth URL and region of that site's Keystone, the admin credentials and the concurrency (to
size the connection pool).

    env = KeystoneEnv.from_keystone(ks, site=2, concurrency=10)   # a services.keystone.Keystone
    env = KeystoneEnv.from_env(DictEnv(2, {...}))                  # what a load driver receives

The password is left out of ``repr`` and never returned by ``public()`` (what may be logged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from juice.errors import UserError
from juice.load.api import Env
from juice.openstack.keystone import Credentials

if TYPE_CHECKING:
    from juice.services.openstack.keystone import Keystone


REQUIRED = ("auth_url", "username", "password", "project_name")


@dataclass(frozen=True)
class AdminCredentials:
    username: str
    password: str = field(repr=False)
    project_name: str = "admin"
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"

    def credentials(self) -> Credentials:
        return Credentials(self.username, self.password, self.project_name, self.user_domain_name,
                           self.project_domain_name)


@dataclass(frozen=True)
class KeystoneEnv:
    site: int
    auth_url: str
    region: str
    admin: AdminCredentials
    concurrency: int = 1
    max_rps: float | None = None   # this driver's share of a target's rate cap
    name_run: str | None = None    # the run part of created names (s_juice_<name_run>_...)
    simulated: bool = False        # the dry run: a recording Keystone simulator, no network

    def get(self, key: str) -> Any:
        """Flat keys, as ``runner.drive.keystone_env`` writes them."""
        if key in ("username", "password", "project_name", "user_domain_name", "project_domain_name"):
            return getattr(self.admin, key)
        return getattr(self, key, None)

    def public(self) -> dict[str, Any]:
        """What may be logged or recorded (no password)."""
        return {"site": self.site, "auth_url": self.auth_url, "region": self.region,
                "username": self.admin.username, "project_name": self.admin.project_name,
                "concurrency": self.concurrency, "max_rps": self.max_rps, "name_run": self.name_run}

    @classmethod
    def from_env(cls, env: Env) -> KeystoneEnv:
        if isinstance(env, KeystoneEnv):
            return env
        missing = [k for k in REQUIRED if not env.get(k)]
        if missing:
            raise UserError(f"env: Keystone scenarios need {', '.join(missing)} "
                            "(the driver's env lacks them)")
        admin = AdminCredentials(str(env.get("username")), str(env.get("password")),
                                 str(env.get("project_name")),
                                 str(env.get("user_domain_name") or "Default"),
                                 str(env.get("project_domain_name") or "Default"))
        rps = env.get("max_rps")
        return cls(site=env.site, auth_url=str(env.get("auth_url")), region=str(env.get("region") or ""),
                   admin=admin, concurrency=int(env.get("concurrency") or 1),
                   max_rps=float(rps) if rps else None,
                   name_run=str(env.get("name_run")) if env.get("name_run") else None,
                   simulated=bool(env.get("simulated")))

    @classmethod
    def from_keystone(cls, ks: Keystone, site: int, concurrency: int = 1) -> KeystoneEnv:
        """From a deployed ``services.keystone.Keystone`` (or anything with its three methods)."""
        c = ks.admin_credentials()
        return cls(site=site, auth_url=ks.auth_url(site), region=ks.region(site),
                   admin=AdminCredentials(c.username, c.password, c.project_name, c.user_domain_name,
                                          c.project_domain_name), concurrency=concurrency)
