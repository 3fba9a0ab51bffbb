"""The admin of one Keystone deployment: its credentials, and the openrc file carrying them.

    creds = ks.admin_credentials()                  # AdminCredentials (the password is secret)
    creds.auth_url(3)                               # the identity URL a client in site 3 uses
    path.write_text(render_openrc(creds, 1, "Region1"))   # shell exports (keep the file 0600)
    read_openrc(path) == creds                      # another process rebuilds them

Used by ``services.keystone`` (which makes them) and ``services.keystone_http`` (which sends
them); it depends on neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from juice.errors import UserError

ADMIN_PROJECT = "admin"
DOMAIN = "Default"


@dataclass(frozen=True)
class AdminCredentials:
    """The admin of one deployment. ``password`` is secret: it is left out of ``repr``."""

    urls: tuple[tuple[int, str], ...]  # (site, auth url)
    username: str
    password: str = field(repr=False)
    project_name: str = ADMIN_PROJECT
    user_domain_name: str = DOMAIN
    project_domain_name: str = DOMAIN

    def auth_url(self, site: int) -> str:
        """The identity URL a client in ``site`` uses (its own site's Keystone, else the first)."""
        urls = dict(self.urls)
        return urls.get(site, self.urls[0][1])


def render_openrc(creds: AdminCredentials, site: int, region: str) -> str:
    """Shell exports for the admin (site ``site``'s Keystone); ``JUICE_KEYSTONE_URLS`` lists
    every site's URL so ``read_openrc`` can rebuild the credentials."""
    urls = ";".join(f"{s}={u}" for s, u in creds.urls)
    return "".join(f"export {k}='{v}'\n" for k, v in [
        ("OS_AUTH_URL", creds.auth_url(site)), ("OS_USERNAME", creds.username),
        ("OS_PASSWORD", creds.password), ("OS_PROJECT_NAME", creds.project_name),
        ("OS_USER_DOMAIN_NAME", creds.user_domain_name),
        ("OS_PROJECT_DOMAIN_NAME", creds.project_domain_name),
        ("OS_IDENTITY_API_VERSION", "3"), ("OS_REGION_NAME", region), ("JUICE_KEYSTONE_URLS", urls)])


def read_openrc(path: Path) -> AdminCredentials:
    """The admin credentials from an openrc written by ``Keystone`` (e.g. after ``juice keystone
    up`` in another process). UserError when the file is missing or not one of ours."""
    env: dict[str, str] = {}
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no openrc (is Keystone up? `juice keystone up`)") from None
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line.removeprefix("export ").split("=", 1)
            env[k] = v.strip("'")
    try:
        pairs = (x.split("=", 1) for x in env["JUICE_KEYSTONE_URLS"].split(";"))
        urls = tuple((int(s), u) for s, u in pairs)
        return AdminCredentials(urls=urls, username=env["OS_USERNAME"], password=env["OS_PASSWORD"],
                                project_name=env["OS_PROJECT_NAME"],
                                user_domain_name=env["OS_USER_DOMAIN_NAME"],
                                project_domain_name=env["OS_PROJECT_DOMAIN_NAME"])
    except (KeyError, ValueError):
        raise UserError(f"{path}: not an openrc written by juice "
                        "(missing JUICE_KEYSTONE_URLS/OS_*)") from None
