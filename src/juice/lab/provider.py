"""The ``provider:`` section of a lab or experiment spec: where the sites run (issue 15).

- ``kind: local`` (the default): every site is a network namespace on this machine.
- ``kind: enoslib`` with exactly one of
  - ``static``: hosts you already have, one per site (site k = the k-th host); needs no
    EnOSlib: Juice reaches them over SSH itself;
  - ``g5k``: Grid'5000 nodes reserved through EnOSlib, one node per site;
  - ``vagrant``: local VMs made by EnOSlib's Vagrant provider, one VM per site.

EnOSlib runs in a venv of its own (``enoslib_python``: EnOSlib 10.9.0 requires rich~=12.0, Juice
pins rich 13.9, so no single environment holds both): ``reserve`` runs ``enoslib_helper.py`` there.
``g5k`` and ``vagrant`` are EnOSlib configuration dictionaries passed through, plus a few
Juice keys; ``enoslib_conf`` adds the machines (role ``site-<k>`` per site) and the networks.
It follows the schemas of **EnOSlib 10.9.0** (``enoslib/infra/enos_g5k/schema.py`` and
``enos_vagrant/schema.py``): unknown top-level keys are refused here, before any reservation.

- g5k, Juice keys: ``cluster`` (required, e.g. ``paravance``) and ``site`` (its Grid'5000 site,
  e.g. ``rennes``; required unless ``resources.networks`` is given). Every site's node gets the
  ``control`` network (type ``prod``) on its primary NIC and the ``wan`` network (a routed
  ``kavlan``) on a secondary NIC. A kavlan needs a deployed OS: ``job_type: [deploy]`` and
  ``env_name: debian12-nfs`` unless given. ``walltime`` is a quoted "HH:MM:SS" string.
- vagrant, Juice keys: ``flavour`` (EnOSlib's names, default ``large``) or ``flavour_desc``
  ({core, mem}), and ``cidr`` of the wan network (default 192.168.42.0/24); ``box`` defaults to
  ``generic/debian12``. Juice reaches each VM through Vagrant's SSH port forward.

On real hosts the WAN is one shared network, so each host's tc filters (juice.lab.hosttc) match
the other sites' WAN addresses as /32. ``netem`` says what to do on a host whose kernel has no
sch_netem: ``auto`` = the userspace delayer (juice-wan-delay) instead, ``require`` = refuse;
``userspace`` = the delayer even where netem exists. ``install: true`` is reserved (hosts are prepared
by the user with scripts/setup.sh); ``keep: true`` leaves the reservation up at the end (EnOSlib
reloads a g5k job by its ``job_name``).

Example::

    p = parse_provider({"kind": "enoslib", "static": {"hosts": [
            {"address": "192.0.2.11"}, {"address": "192.0.2.12", "key_file": "~/.ssh/id_ed25519"}]}},
        sites=2)
    print(render_plan(p, 2, [[0, 50], [50, 0]]))     # dry run: no network, no EnOSlib
    with reserve(p, 2, Path("/tmp/juice-x"), print) as hosts:   # site k = hosts[k - 1]
        ...
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from annotated_types import Interval
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from juice.errors import LabError, UserError
from juice.lab import hosttc
from juice.paths import cache_dir
from juice.spec.base import MAX_SITES, Strict, StrictBool, StrictStr, plain_data
from juice.util.validation import one_line, shown

ENOSLIB_VERSION = "10.9.0"
ENOSLIB_REQ = f"enoslib[vagrant]=={ENOSLIB_VERSION}"  # the vagrant extra adds python-vagrant
HELPER = Path(__file__).with_name("enoslib_helper.py")
G5K_ENV = "debian12-nfs"
VAGRANT_BOX = "generic/debian12"
VAGRANT_CIDR = "192.168.42.0/24"
VAGRANT_FLAVOURS = ("tiny", "small", "medium", "big", "large", "extra-large")
# EnOSlib 10.9.0's top-level keys (additionalProperties: false in its schemas)
G5K_KEYS = {"dhcp", "force_deploy", "env_name", "env_version", "job_name", "job_type", "key", "monitor",
            "oargrid_jobids", "project", "queue", "reservation", "walltime", "resources"}
VAGRANT_KEYS = {"backend", "box", "user", "name_prefix", "config_extra", "resources"}
JUICE_KEYS = {"g5k": {"cluster", "site"}, "vagrant": {"flavour", "flavour_desc", "cidr"}}
_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")  # IFNAMSIZ - 1
_NETNAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_FIELD = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*: ")
_FORMS: dict[str, tuple[Callable[[str], object], str]] = {
    "user": (_USER.match, "a user name"),
    "key_file": (lambda v: v and "\x00" not in v and "\n" not in v, "a file path"),
    "wan_interface": (_IFNAME.match, "an interface name (1-15 of letters, digits, _.-)"),
    "python": (lambda v: v.startswith("/") and not any(c.isspace() or c == "\x00" for c in v),
               "an absolute path to python3 on the host"),
}

Port = Annotated[int, Field(strict=True), Interval(ge=1, le=65535)]
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def role(site: int) -> str:
    """The EnOSlib role of site ``site`` (1-based)."""
    return f"site-{site}"


def _ipv4(v: str) -> str:
    try:
        return str(ipaddress.IPv4Address(v))
    except ValueError:
        raise ValueError(f"not an IPv4 address: {shown(v)}") from None


class StaticHost(Strict):
    """One host (one site). ``address`` is what Juice ssh-es to (the control network)."""

    address: StrictStr = Field(description="hostname or IPv4 address (control network)")
    user: StrictStr = Field(default="root", description="SSH user")
    port: Port = Field(default=22, description="SSH port, 1..65535")
    key_file: StrictStr | None = Field(default=None, max_length=4096, description="SSH private key")
    wan_address: StrictStr | None = Field(default=None, description="IPv4 the other sites reach "
                                          "this host on (default: address, resolved)")
    wan_interface: StrictStr | None = Field(default=None, description="WAN interface (default: "
                                            "detected on the host)")
    python: StrictStr = Field(default="/usr/bin/python3", max_length=4096)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if ":" in v:
            raise ValueError(f"IPv6 or host:port is not supported: {shown(v)} (give an IPv4 address "
                             "or a hostname, and the port in port:)")
        if "@" in v:
            raise ValueError(f"{shown(v)}: give the user in user:, not in the address")
        if re.fullmatch(r"[0-9.]+", v):
            return _ipv4(v)
        if not _HOSTNAME.match(v):
            raise ValueError(f"not a hostname or IPv4 address: {shown(v)}")
        return v

    @field_validator("user", "key_file", "wan_interface", "python")
    @classmethod
    def _form(cls, v: str | None, info: ValidationInfo) -> str | None:
        ok, what = _FORMS[str(info.field_name)]
        if v is not None and not ok(v):
            raise ValueError(f"expected {what}, got {shown(v)}")
        return v

    @field_validator("wan_address")
    @classmethod
    def _wan(cls, v: str | None) -> str | None:
        return None if v is None else _ipv4(v)

    def key_path(self) -> Path | None:
        """``key_file`` with ``~`` expanded (None: ssh's default keys)."""
        return None if self.key_file is None else Path(self.key_file).expanduser()

    def known_wan(self) -> str | None:
        """The WAN IPv4 when known without DNS: ``wan_address``, else ``address`` if an IPv4."""
        if self.wan_address is not None:
            return self.wan_address
        return self.address if re.fullmatch(r"[0-9.]+", self.address) else None


class StaticConf(Strict):
    """Hosts you have: one per site, site k = the k-th host."""

    hosts: list[StaticHost] = Field(max_length=MAX_SITES, description="1..250 hosts")

    @model_validator(mode="after")
    def _distinct(self) -> StaticConf:
        if not self.hosts:
            raise ValueError("hosts: empty: give one host per site (site k = the k-th host)")
        seen: dict[tuple[str, int], int] = {}
        wans: dict[str, int] = {}
        for i, h in enumerate(self.hosts):
            key = (h.address.lower(), h.port)
            if key in seen:
                raise ValueError(f"hosts.{i}: {h.address}:{h.port} is also hosts.{seen[key]} "
                                 "(one host per site; several sites on one machine is the local lab)")
            seen[key] = i
            wan = h.known_wan()
            if wan is not None and wan in wans:
                raise ValueError(f"hosts.{i}.wan_address: {wan} is also the WAN address of hosts.{wans[wan]} "
                                 "(the WAN filters match one address per site): give each host its "
                                 "wan_address")
            if wan is not None:
                wans[wan] = i
        return self


class Provider(Strict):
    """Where the sites run. See the module doc."""

    kind: Literal["local", "enoslib"] = "local"
    static: StaticConf | None = None
    g5k: dict[str, Any] | None = Field(default=None, description="EnOSlib g5k conf + cluster, site")
    vagrant: dict[str, Any] | None = Field(default=None, description="EnOSlib vagrant conf + flavour, cidr")
    control_network: StrictStr = Field(default="control", description="role of the SSH network (g5k)")
    wan_network: StrictStr = Field(default="wan", description="role of the network the WAN is emulated on")
    install: StrictBool = Field(default=False, description="reserved: hosts are prepared by the user")
    netem: Literal["auto", "require", "userspace"] = "auto"
    keep: StrictBool = Field(default=False, description="g5k/vagrant: leave the reservation up at the end")

    @field_validator("control_network", "wan_network")
    @classmethod
    def _netname(cls, v: str) -> str:
        if not _NETNAME.match(v):
            raise ValueError(f"not a network name (a lowercase letter, then 0-31 of a-z 0-9 _-): {shown(v)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Provider:
        given = [k for k in ("static", "g5k", "vagrant") if getattr(self, k) is not None]
        if self.kind == "local" and given:
            raise ValueError(f"{given[0]}: only with kind: enoslib (kind local runs every site in a "
                             "namespace on this machine)")
        if self.kind == "enoslib" and len(given) != 1:
            raise ValueError("kind enoslib needs exactly one of static, g5k, vagrant"
                             + (f" (got {' and '.join(given)})" if given else ""))
        if self.install:
            raise ValueError("install: true is reserved for a later version; prepare each host with "
                             "scripts/setup.sh and leave install: false")
        if self.control_network == self.wan_network:
            raise ValueError(f"wan_network: the same name as control_network ({self.wan_network})")
        for which in ("g5k", "vagrant"):
            conf = getattr(self, which)
            if conf is not None:
                _check_conf(which, conf, self)
        return self


def _check_conf(which: str, conf: dict[str, Any], p: Provider) -> None:
    """ValueError naming ``<which>.<key>`` for what EnOSlib 10.9 would refuse after a reservation."""
    plain_data(conf, which)
    allowed = (G5K_KEYS if which == "g5k" else VAGRANT_KEYS) | JUICE_KEYS[which]
    for k in conf:
        if k not in allowed:
            raise ValueError(f"{which}.{k}: unknown key (EnOSlib {ENOSLIB_VERSION}'s {which} keys: "
                             f"{', '.join(sorted(allowed - JUICE_KEYS[which]))}; Juice's: "
                             f"{', '.join(sorted(JUICE_KEYS[which]))})")
    res = conf.get("resources", {})
    if not isinstance(res, dict) or set(res) - {"networks"}:
        raise ValueError(f"{which}.resources: only networks may be given (Juice makes one machine per "
                         "site, role site-<k>)")
    nets = res.get("networks")
    if nets is not None:
        if not isinstance(nets, list) or not all(isinstance(n, dict) for n in nets):
            raise ValueError(f"{which}.resources.networks: expected a list of mappings")
        roles = {r for n in nets for r in (n.get("roles") or []) if isinstance(r, str)}
        need = [p.wan_network] + ([p.control_network] if which == "g5k" else [])
        for r in need:
            if r not in roles or (which == "g5k" and r not in {n.get("id") for n in nets}):
                raise ValueError(f"{which}.resources.networks: no network with id and role {r!r} "
                                 "(control_network / wan_network)")
    for k in ("walltime", "reservation", "env_name", "job_name", "key", "box", "cidr", "flavour", "site",
              "cluster"):
        v = conf.get(k)
        if v is not None and not isinstance(v, str):
            hint = ""
            if k == "walltime" and isinstance(v, int) and not isinstance(v, bool):
                hms = f"{v // 3600}:{v // 60 % 60:02}:{v % 60:02}"
                hint = f' (quote it: walltime: "{hms}"; YAML reads an unquoted {hms} as {v} seconds)'
            raise ValueError(f"{which}.{k}: expected a string, got {shown(v)}{hint}")
    if which == "g5k":
        if "cluster" not in conf:
            raise ValueError("g5k.cluster: required: the Grid'5000 cluster of every site's node "
                             "(e.g. paravance)")
        if "site" not in conf and nets is None:
            raise ValueError("g5k.site: required: the Grid'5000 site of the cluster (e.g. rennes for "
                             "paravance), where the networks are reserved")
        wt = conf.get("walltime", "0:00:00")
        if not isinstance(wt, str) or not re.fullmatch(r"\d+:[0-5]\d:[0-5]\d", wt):
            raise ValueError(f"g5k.walltime: expected HH:MM:SS, got {shown(conf['walltime'])}")
    else:
        flavour = conf.get("flavour")
        if "flavour" in conf and (not isinstance(flavour, str) or flavour not in VAGRANT_FLAVOURS):
            raise ValueError(f"vagrant.flavour: {shown(conf['flavour'])} is not one of "
                             f"{', '.join(VAGRANT_FLAVOURS)} (or give flavour_desc: {{core, mem}})")
        if "flavour" in conf and "flavour_desc" in conf:
            raise ValueError("vagrant.flavour_desc: give flavour or flavour_desc, not both")
        if "cidr" in conf:
            try:
                ipaddress.IPv4Network(conf["cidr"])
            except ValueError as e:
                raise ValueError(f"vagrant.cidr: not an IPv4 network ({e})") from None


def check_sites(p: Provider, sites: int, where: str = "provider") -> None:
    """UserError unless ``p`` can hold ``sites`` sites (static: at least one host per site)."""
    if p.static is not None and len(p.static.hosts) < sites:
        raise UserError(f"{where}.static.hosts: {len(p.static.hosts)} host(s) for {sites} sites: give "
                        "one host per site (site k = the k-th host)")


def hosts_fit(p: Provider, sites: int, study: str, on_hosts: bool = True) -> None:
    """For a study spec's ``provider:`` (ValueError naming the field, for pydantic): at least
    one static host per site; ``on_hosts`` False: the study runs in a local lab only so far."""
    if p.kind == "local":
        return
    if not on_hosts:
        raise ValueError(f"provider.kind: the {study} study runs in a local lab only so far (leave "
                         "provider: out); docs/multi-host.md lists what runs on hosts")
    try:
        check_sites(p, sites)
    except UserError as e:
        raise ValueError(str(e)) from None


def parse_provider(data: Any, sites: int, where: str = "provider") -> Provider:
    """The validated ``provider:`` mapping (None: kind local), or a one-line UserError (exit 2)
    naming the field under ``where`` and the fix."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping (kind, static, g5k, vagrant, ...), got {shown(data)}")
    try:
        p = Provider.model_validate(data)
    except ValidationError as e:
        msg = one_line(e, "", "see docs/multi-host.md for the provider keys", data)
        named = bool(e.errors()[0]["loc"]) or _FIELD.match(msg)
        raise UserError(f"{where}.{msg}" if named else f"{where}: {msg}") from None
    check_sites(p, sites, where)
    return p


def site_hosts(p: Provider, sites: int) -> list[StaticHost]:
    """The static hosts of sites 1..``sites`` (site k = the k-th host; extra hosts unused)."""
    if p.static is None:
        raise ValueError("site_hosts: the provider has no static hosts")
    check_sites(p, sites)
    return list(p.static.hosts[:sites])


def enoslib_conf(p: Provider, sites: int) -> dict[str, Any]:
    """The EnOSlib 10.9 configuration dictionary (``G5kConf`` / ``VagrantConf.from_dictionary``)
    for ``sites`` sites: one machine per site with role ``site-<k>``, and the networks."""
    if p.g5k is not None:
        user = p.g5k
        conf = {k: v for k, v in user.items() if k not in JUICE_KEYS["g5k"] | {"resources"}}
        conf.setdefault("job_name", "juice")
        conf.setdefault("job_type", ["deploy"])
        conf.setdefault("env_name", G5K_ENV)
        nets = user.get("resources", {}).get("networks") or [
            {"id": p.control_network, "type": "prod", "roles": [p.control_network], "site": user["site"]},
            {"id": p.wan_network, "type": "kavlan", "roles": [p.wan_network], "site": user["site"]}]
        machines = [{"roles": [role(k)], "cluster": user["cluster"], "nodes": 1,
                     "primary_network": p.control_network, "secondary_networks": [p.wan_network]}
                    for k in range(1, sites + 1)]
    elif p.vagrant is not None:
        user = p.vagrant
        conf = {k: v for k, v in user.items() if k not in JUICE_KEYS["vagrant"] | {"resources"}}
        conf.setdefault("box", VAGRANT_BOX)
        size = {"flavour_desc": user["flavour_desc"]} if "flavour_desc" in user else \
            {"flavour": user.get("flavour", "large")}
        nets = user.get("resources", {}).get("networks") or [
            {"cidr": user.get("cidr", VAGRANT_CIDR), "roles": [p.wan_network]}]
        machines = [{"roles": [role(k)], **size, "number": 1} for k in range(1, sites + 1)]
    else:
        raise ValueError("enoslib_conf: only for provider g5k or vagrant")
    return {**conf, "resources": {"machines": machines, "networks": nets}}


def wan_dst(host: StaticHost | None, site: int) -> str:
    """What the other sites' tc filters match for ``site``: its WAN IPv4 as /32, or a placeholder
    when it is known only after a reservation or a DNS lookup."""
    wan = host.known_wan() if host is not None else None
    return f"{wan}/32" if wan else f"<wan-address-of-site-{site}>/32"


def render_plan(p: Provider, sites: int, matrix: Sequence[Sequence[float]], jitter_ms: float = 0.0,
                loss_pct: float = 0.0, roles: Mapping[int, Sequence[str]] | None = None) -> str:
    """A dry run as text: the provider, the EnOSlib conf or the hosts, site -> host and the
    study's ``roles`` there (what runs in each site), and per site the tc commands ``hosttc``
    would apply. No network, no EnOSlib."""
    if len(matrix) != sites or any(len(r) != sites for r in matrix):
        raise ValueError(f"render_plan: matrix must be {sites}x{sites}")
    if p.kind == "local":
        return "provider: local (every site is a network namespace on this machine)\n"
    hosts: list[StaticHost | None] = list(site_hosts(p, sites)) if p.static else [None] * sites
    which = "static" if p.static else "g5k" if p.g5k is not None else "vagrant"
    out = [f"provider: enoslib ({which})"
           + ("" if p.static else f", EnOSlib {ENOSLIB_VERSION} run by {enoslib_python()}"),
           f"netem: {p.netem} (" + {"auto": "tc + netem below; if a host has no sch_netem, the userspace "
                                            "delayer juice-wan-delay (NFQUEUE, mangle OUTPUT) on every host",
                                    "require": "tc + netem below; a host without sch_netem stops the run",
                                    "userspace": "the userspace delayer juice-wan-delay (NFQUEUE, mangle "
                                                 "OUTPUT) on every host, no tc"}[p.netem] + ")"]
    if p.static is not None:
        unused = p.static.hosts[sites:]
        out.append(f"hosts: {len(p.static.hosts)}" + (f" ({len(unused)} unused)" if unused else ""))
    else:
        out += [f"EnOSlib configuration ({which}):",
                *("  " + line for line in yaml.safe_dump(enoslib_conf(p, sites), sort_keys=False,
                                                         default_flow_style=False).splitlines())]
    out.append("sites:")
    for k, h in enumerate(hosts, 1):
        runs = (roles or {}).get(k)
        there = "" if roles is None else "; runs " + (", ".join(runs) if runs else "nothing")
        if h is None:
            out.append(f"  site {k}: role {role(k)} (the {which} machine EnOSlib gives), WAN on "
                       f"network {p.wan_network!r}{there}")
        else:
            out.append(f"  site {k}: {h.user}@{h.address}:{h.port} WAN "
                       f"{h.known_wan() or '<resolved address>'} on {h.wan_interface or '<detected>'}{there}")
    subnets = {k: wan_dst(h, k) for k, h in enumerate(hosts, 1)}
    out.append("WAN (ONE-WAY delays: each host delays what it sends; RTT = both directions):")
    for k, h in enumerate(hosts, 1):
        dev = h.wan_interface if h is not None and h.wan_interface else f"<wan-if-of-site-{k}>"
        rules = hosttc.rules_for(k, matrix, subnets, jitter_ms, loss_pct)
        out.append(f"  site {k} ({dev}): {len(rules)} delayed destination(s)")
        if p.netem == "userspace":
            out += [f"    to {r.dst}: {' '.join(r.netem_args()[:-2])}" for r in rules]
        elif rules:
            out += ["    " + c for c in hosttc.render(dev, rules)]
            out.append(f"    check: tc -j qdisc show dev {dev}; teardown: {hosttc.teardown(dev)[0]}")
    return "\n".join(out) + "\n"


def enoslib_python() -> Path:
    """The Python of EnOSlib's own venv: $JUICE_ENOSLIB_PYTHON, else <JUICE_CACHE>/enoslib/bin/python."""
    env = os.environ.get("JUICE_ENOSLIB_PYTHON")
    return Path(env) if env else cache_dir() / "enoslib" / "bin" / "python"


def install_hint() -> str:
    """How to make EnOSlib's venv (the command a UserError shows)."""
    venv = cache_dir() / "enoslib"
    return (f"python3 -m venv {venv} && {venv}/bin/pip install '{ENOSLIB_REQ}' (a venv of its own: "
            f"EnOSlib {ENOSLIB_VERSION} requires rich~=12.0, Juice pins rich 13.9), or set "
            "JUICE_ENOSLIB_PYTHON to a Python that has it")


def _enoslib_version(py: Path, which: str) -> str:
    try:
        cp = subprocess.run([str(py), str(HELPER), "version"], capture_output=True, text=True,
                            timeout=120, check=False)
        why = (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
    except (OSError, subprocess.TimeoutExpired) as e:
        cp, why = None, str(e)
    if cp is None or cp.returncode != 0:
        raise UserError(f"provider.kind enoslib with {which} needs EnOSlib {ENOSLIB_VERSION} ({py}: "
                        f"{why}): {install_hint()}")
    return (cp.stdout.strip().splitlines() or ["?"])[-1]


def _helper(py: Path, args: list[str], workdir: Path, log: Path) -> str | None:
    """Run the helper in ``workdir``, its output appended to ``log``; None, or why it failed."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"--- enoslib_helper {' '.join(args)}\n")
        out.flush()
        rc = subprocess.run([str(py), str(HELPER), *args], cwd=workdir, stdin=subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if rc == 0:
        return None
    lines = [x for x in log.read_text(encoding="utf-8", errors="replace").splitlines() if x.strip()]
    return f"{lines[-1] if lines else f'exit {rc}'} (log: {log})"


@contextlib.contextmanager
def reserve(p: Provider, sites: int, workdir: Path,
            progress: Progress = _quiet) -> Iterator[list[StaticHost]]:
    """The hosts of sites 1..``sites`` (site k = item k-1) for the duration of the block.

    static: the given hosts, nothing reserved, no EnOSlib. g5k / vagrant: ``enoslib_helper.py``
    run by EnOSlib's own Python (``enoslib_python``; missing: a UserError with the command that
    makes it) in ``workdir``: ``init()`` of ``enoslib_conf``, ``sync_info`` for each host's WAN
    address and interface; on exit, also on errors and Ctrl-C, ``destroy()`` (unless ``keep``).
    Juice connects to the nodes directly (no jump host): on Grid'5000, run it on a frontend or
    over the VPN. NOT TESTED against Grid'5000 or Vagrant here (neither is reachable): the
    protocol is tested with a stand-in EnOSlib; the calls follow EnOSlib 10.9.0's API."""
    if p.kind == "local":
        raise ValueError("reserve: kind local has no hosts")
    if p.static is not None:
        yield site_hosts(p, sites)
        return
    which = "g5k" if p.g5k is not None else "vagrant"
    req = {"which": which, "conf": enoslib_conf(p, sites), "sites": sites, "wan_network": p.wan_network,
           "python": "/usr/bin/python3"}
    py = enoslib_python()
    version = _enoslib_version(py, which)
    if not version.startswith(ENOSLIB_VERSION.rsplit(".", 1)[0] + "."):
        progress(f"warning: EnOSlib {version} at {py}; Juice follows EnOSlib {ENOSLIB_VERSION}")
    workdir.mkdir(parents=True, exist_ok=True)
    req_file, result, log = (workdir / f"enoslib-{n}" for n in ("request.json", "hosts.json", "log.txt"))
    req_file.write_text(json.dumps(req, indent=1), encoding="utf-8")
    result.unlink(missing_ok=True)
    failed = False
    try:
        progress(f"{which}: reserving {sites} machine(s) with EnOSlib {version} (minutes; log: {log})")
        why = _helper(py, ["up", str(req_file), str(result)], workdir, log)
        if why is not None:
            raise LabError(f"{which}: EnOSlib could not reserve the machines: {why}")
        try:
            hosts = [StaticHost.model_validate(h) for h in json.loads(result.read_text())["hosts"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise LabError(f"{which}: unusable host list from EnOSlib in {result}: {e}") from None
        if len(hosts) != sites:
            raise LabError(f"{which}: EnOSlib gave {len(hosts)} machine(s) for {sites} sites")
        progress(f"{which}: " + ", ".join(f"site {k} = {h.address} (WAN {h.wan_address} on "
                                          f"{h.wan_interface})" for k, h in enumerate(hosts, 1)))
        yield hosts
    except BaseException:
        failed = True
        raise
    finally:
        if p.keep:
            progress(f"{which}: kept (provider.keep); release it with: {py} {HELPER} down {req_file}")
        else:
            why = _helper(py, ["down", str(req_file)], workdir, log)
            if why is None:
                progress(f"{which}: released")
            else:
                msg = (f"{which}: could not release the reservation: {why}; retry: {py} {HELPER} down "
                       f"{req_file}")
                progress(msg)
                if not failed:
                    raise LabError(msg)
