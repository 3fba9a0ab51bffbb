"""A cloud that already exists, as the target of an experiment (issue 16, first part: the spec
section and where the credentials come from; the runs against it come later).

    target: {cloud: mycloud}                       # clouds.yaml (openstacksdk's format and path)
    target: {cloud: mycloud, clouds_file: ./clouds.yaml}
    target: {openrc: ./admin-openrc.sh}            # `export OS_...=` lines, never executed
    target: {rally_env: ./env.json}                # a Rally env spec ({"openstack": {...}})
    target: {auth_url: "http://...:5000/v3", username: admin, project_name: admin,
             password_env: OS_PASSWORD}            # the password from the environment

``resolve(target, environ)`` gives :class:`Credentials`. A password is never read from the spec
file and never stored in results: ``Credentials.public()`` is what manifests keep. Where the
password comes from: clouds.yaml (or its secure.yaml), the openrc file, the Rally env file, or
else the environment variable ``password_env`` (default ``OS_PASSWORD``).

clouds.yaml search path (as openstacksdk): ``$OS_CLIENT_CONFIG_FILE``, ``./clouds.yaml``,
``~/.config/openstack/clouds.yaml``, ``/etc/openstack/clouds.yaml``; ``secure.yaml`` next to
it (same places) is merged in.

Resource profiles of the cloud's servers, only when the user gives SSH access (a key or the
agent, never a password; ``juice.profile.ssh`` samples /proc there)::

    target: {cloud: mycloud, ssh: [{host: ctl1.example.org, user: root, key_file: ~/.ssh/id_ed25519},
                                   {host: db1.example.org, port: 2222, site_name: db,
                                    processes: ["mariadb=mariadbd", "haproxy"]}]}

``processes``: ``[component=]regex`` searched in each process's command line (as ``ps -o args``
shows it); the component is the name before ``=``, else the matched text's last path part.
Default: ``DEFAULT_PROCESSES`` (Keystone under gunicorn/uwsgi/mod_wsgi, MariaDB/MySQL,
PostgreSQL, RabbitMQ, memcached, nova-*, placement).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated

import yaml
from annotated_types import Interval
from pydantic import Field, StringConstraints, field_validator, model_validator

from juice.errors import UserError
from juice.spec.base import Strict

ENV_RE = r"^[A-Z_][A-Z0-9_]{0,63}$"
MAX_SSH_HOSTS = 64
MAX_PROCESS_PATTERNS = 50
DEFAULT_PROCESSES = (
    r"keystone=(?:gunicorn|uwsgi).*keystone|keystone-wsgi|wsgi:keystone|keystone-all",
    r"placement=(?:gunicorn|uwsgi).*placement|placement-api|wsgi:placement",
    r"(?:^|[\s/])nova-[a-z]+(?:-[a-z]+)*",
    r"^\S*mariadbd\b", r"^\S*mysqld\b", r"postgres=^(?:\S*/)?postgres\b",
    r"rabbitmq=beam\.smp.*rabbit", r"^\S*memcached\b",
)
_COMPONENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}"
AUTH_KEYS = ("auth_url", "username", "project_name", "user_domain_name", "project_domain_name")


def _check_pattern(p: str) -> str:
    name, sep, regex = p.partition("=")
    if not sep or not re.fullmatch(_COMPONENT, name):
        regex = p
    try:
        re.compile(regex)
    except re.error as e:
        raise ValueError(f"not a regular expression ({e}): {p!r}") from None
    if not regex:
        raise ValueError(f"empty pattern: {p!r}")
    return p


Pattern = Annotated[str, StringConstraints(min_length=1, max_length=300)]


class SshHost(Strict):
    """One host of the cloud Juice may log into (key or agent only: ssh runs with BatchMode)."""

    host: str = Field(pattern=r"^[A-Za-z0-9_.:\[\]][A-Za-z0-9_.:%\[\]-]{0,252}$",
                      description="name or address (never starting with '-')")
    port: Annotated[int, Interval(ge=1, le=65535)] = Field(default=22, strict=True)
    user: str = Field(default="root", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
    key_file: str | None = Field(default=None, min_length=1, max_length=4096,
                                 description="private key (else ssh's own defaults and agent)")
    site_name: str | None = Field(default=None, pattern=rf"^{_COMPONENT}$")
    processes: list[Pattern] | None = Field(
        default=None, min_length=1, max_length=MAX_PROCESS_PATTERNS,
        description="[component=]regex per process kind (default: DEFAULT_PROCESSES)")

    @model_validator(mode="before")
    @classmethod
    def _no_password(cls, data: object) -> object:
        if isinstance(data, dict) and {"password", "passphrase"} & set(data):
            raise ValueError("password: never in the spec (a key_file or ssh-agent; ssh runs with "
                             "BatchMode=yes and never prompts)")
        return data

    @field_validator("processes")
    @classmethod
    def _patterns(cls, v: list[str] | None) -> list[str] | None:
        for p in v or ():
            _check_pattern(p)
        return v

    @property
    def patterns(self) -> tuple[str, ...]:
        return tuple(self.processes) if self.processes else DEFAULT_PROCESSES


class Target(Strict):
    """Exactly one way of naming the cloud (see the module doc)."""

    cloud: str | None = Field(default=None, min_length=1, max_length=200)
    clouds_file: str | None = Field(default=None, min_length=1)
    openrc: str | None = Field(default=None, min_length=1)
    rally_env: str | None = Field(default=None, min_length=1)
    auth_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    username: str | None = Field(default=None, min_length=1)
    project_name: str | None = Field(default=None, min_length=1)
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"
    region_name: str | None = None
    password_env: str = Field(default="OS_PASSWORD", pattern=ENV_RE)
    max_rps: Annotated[float, Interval(ge=0.1, le=10_000)] = Field(
        default=20.0, allow_inf_nan=False, strict=True,
        description="API requests per second the whole run never exceeds (every driver "
                    "together), 0.1..10,000")
    endpoints: dict[Annotated[str, StringConstraints(min_length=1, max_length=200)],
                    Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$")]] | None = Field(
        default=None, description="region -> identity URL, instead of the catalog's (high load: "
                                  "one driver per region)")

    db_url_env: str | None = Field(default=None, pattern=ENV_RE, description=(
        "an environment variable holding a read-only mysql://user:password@host:port of the cloud's "
        "database: statement counters (%reads/%writes) around each run"))
    ssh: list[SshHost] | None = Field(default=None, min_length=1, max_length=MAX_SSH_HOSTS, description=(
        "hosts of the cloud to profile over SSH (CPU, RSS, threads, fds of its servers)"))

    @property
    def label(self) -> str:
        """Names the cloud in run keys, plans and reports (no secret, no file content)."""
        if self.cloud is not None:
            return f"cloud {self.cloud}"
        if self.openrc is not None:
            return f"openrc {Path(self.openrc).name}"
        if self.rally_env is not None:
            return f"rally env {Path(self.rally_env).name}"
        return f"{self.username}@{self.auth_url}"

    @model_validator(mode="after")
    def _one_way(self) -> Target:
        ways = [w for w in ("cloud", "openrc", "rally_env", "auth_url") if getattr(self, w) is not None]
        if len(ways) != 1:
            raise ValueError("give exactly one of cloud, openrc, rally_env or auth_url "
                             f"(got {', '.join(ways) or 'none'})")
        if self.clouds_file is not None and self.cloud is None:
            raise ValueError("clouds_file: only with cloud")
        if self.auth_url is not None and (self.username is None or self.project_name is None):
            raise ValueError("auth_url: give username and project_name too (the password comes from "
                             "the environment variable password_env)")
        return self


@dataclass(frozen=True)
class Credentials:
    auth_url: str
    username: str
    password: str
    project_name: str
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"
    region_name: str | None = None
    source: str = ""
    juice_lab: str | None = None  # clouds.yaml written by `juice keystone up --publish`
    endpoints: dict[str, str] | None = None  # region -> identity URL (that clouds.yaml's loopback ones)

    def public(self) -> dict[str, object]:
        """Everything but the password (what a manifest may keep)."""
        d = asdict(self)
        d.pop("password")
        return d

    def __repr__(self) -> str:  # never print a password by accident
        return f"Credentials({self.public()})"


def clouds_paths(environ: Mapping[str, str], cwd: Path, home: Path) -> list[Path]:
    if environ.get("OS_CLIENT_CONFIG_FILE"):
        return [Path(environ["OS_CLIENT_CONFIG_FILE"])]
    return [cwd / "clouds.yaml", home / ".config/openstack/clouds.yaml", Path("/etc/openstack/clouds.yaml")]


def _read_yaml(path: Path) -> dict[str, object]:
    try:
        data: object = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UserError(f"{path}: cannot read it as YAML ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with a `clouds:` key")
    return data


def _merge(a: Mapping[str, object], b: Mapping[str, object]) -> dict[str, object]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(cur, v) if isinstance(v, Mapping) and isinstance(cur := out.get(k), dict) else v
    return out


def _map(v: object) -> Mapping[str, object]:
    """``v`` when it is a mapping, else {} (an absent or null section of a YAML file)."""
    return v if isinstance(v, Mapping) else {}


def _from_clouds(t: Target, environ: Mapping[str, str], cwd: Path, home: Path) -> Credentials:
    paths = [Path(t.clouds_file)] if t.clouds_file else clouds_paths(environ, cwd, home)
    found = next((p for p in paths if p.is_file()), None)
    if found is None:
        raise UserError(f"target.cloud: no clouds.yaml found (looked in {', '.join(map(str, paths))}); "
                        "give target.clouds_file or set OS_CLIENT_CONFIG_FILE")
    clouds = _map(_read_yaml(found).get("clouds"))
    cloud = str(t.cloud)  # set: this source was chosen for it
    if cloud not in clouds:
        raise UserError(f"target.cloud: {found}: no cloud named {t.cloud!r} "
                        f"(clouds: {', '.join(sorted(map(str, clouds))) or 'none'})")
    entry = dict(_map(clouds[cloud]))
    secure = found.with_name("secure.yaml")
    if secure.is_file():
        entry = _merge(entry, _map(_map(_read_yaml(secure).get("clouds")).get(cloud)))
    auth = dict(_map(entry.get("auth")))
    creds = _complete(auth, entry.get("region_name"), t, environ, f"clouds.yaml {found} cloud {t.cloud}")
    lab, eps = entry.get("juice_lab"), entry.get("juice_endpoints")
    if isinstance(lab, str) and lab:
        creds = replace(creds, juice_lab=lab)
    if isinstance(eps, dict) and eps:
        creds = replace(creds, endpoints={str(k): str(v) for k, v in eps.items()})
    return creds


_EXPORT = re.compile(r"^\s*(?:export\s+)?(OS_[A-Z_]+)=(.*)$")


def _from_openrc(t: Target, environ: Mapping[str, str]) -> Credentials:
    path = Path(str(t.openrc))
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise UserError(f"target.openrc: {path}: cannot read ({e.strerror or e})") from None
    env: dict[str, str] = {}
    for line in lines:
        m = _EXPORT.match(line)
        if m:
            try:
                parts = shlex.split(m.group(2))
            except ValueError:
                continue
            value = parts[0] if parts else ""
            if "$" not in value:  # a prompt or a variable: not a literal, never evaluated
                env[m.group(1)] = value
    auth = {"auth_url": env.get("OS_AUTH_URL"), "username": env.get("OS_USERNAME"),
            "password": env.get("OS_PASSWORD"), "project_name": env.get("OS_PROJECT_NAME"),
            "user_domain_name": env.get("OS_USER_DOMAIN_NAME"),
            "project_domain_name": env.get("OS_PROJECT_DOMAIN_NAME")}
    return _complete(auth, env.get("OS_REGION_NAME"), t, environ, f"openrc {path}")


def _from_rally(t: Target, environ: Mapping[str, str]) -> Credentials:
    path = Path(str(t.rally_env))
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"target.rally_env: {path}: not a readable JSON file ({e})") from None
    osd = (data.get("openstack") or data.get("existing@openstack")) if isinstance(data, dict) else None
    if not isinstance(osd, dict):
        raise UserError(f"target.rally_env: {path}: expected a Rally env spec with an `openstack` key")
    user = osd.get("admin") or (osd.get("users") or [None])[0]
    if not isinstance(user, dict):
        raise UserError(f"target.rally_env: {path}: openstack.admin (or users[0]) is missing")
    auth = {"auth_url": osd.get("auth_url"), **{k: user.get(k) for k in
                                                ("username", "password", "project_name", "user_domain_name",
                                                 "project_domain_name")}}
    auth["project_name"] = auth["project_name"] or user.get("tenant_name")
    return _complete(auth, osd.get("region_name"), t, environ, f"rally env {path}")


def _complete(auth: Mapping[str, object], region: object, t: Target, environ: Mapping[str, str],
              source: str) -> Credentials:
    missing = [k for k in ("auth_url", "username", "project_name") if not auth.get(k)]
    if missing:
        raise UserError(f"target: {source}: {', '.join(missing)} missing")
    password = auth.get("password") or environ.get(t.password_env)
    if not password:
        raise UserError(f"target: {source} holds no password: set the environment variable "
                        f"{t.password_env} (target.password_env names another)")
    return Credentials(auth_url=str(auth["auth_url"]), username=str(auth["username"]),
                       password=str(password), project_name=str(auth["project_name"]),
                       user_domain_name=str(auth.get("user_domain_name") or "Default"),
                       project_domain_name=str(auth.get("project_domain_name") or "Default"),
                       region_name=str(region) if region else t.region_name, source=source)


def resolve(t: Target, environ: Mapping[str, str] | None = None, cwd: Path | None = None,
            home: Path | None = None) -> Credentials:
    """The credentials ``t`` names; UserError (one line, naming the field/file) otherwise."""
    env = os.environ if environ is None else environ
    if t.cloud is not None:
        return _from_clouds(t, env, cwd or Path.cwd(), home or Path.home())
    if t.openrc is not None:
        return _from_openrc(t, env)
    if t.rally_env is not None:
        return _from_rally(t, env)
    auth = {k: getattr(t, k) for k in AUTH_KEYS}
    return _complete(auth, t.region_name, t, env, "target")
