"""The provider: section (issue 15): parsing and its one-line errors, the static site mapping,
the EnOSlib 10.9 configurations (golden), the dry-run plan, and reserve() -- static, without
EnOSlib (the UserError with the command that installs it), and the g5k path end to end against
a stand-in ``enoslib`` package (no Grid'5000 or Vagrant here: the protocol with the helper, the
mapping of roles to hosts, and destroy() on every exit are what is tested)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from juice.errors import LabError, UserError
from juice.lab.provider import StaticHost, enoslib_conf, parse_provider, render_plan, reserve, site_hosts

H3 = [{"address": "192.0.2.11"}, {"address": "192.0.2.12", "port": 2222, "user": "juice"},
      {"address": "host-c.example", "wan_address": "198.51.100.13", "wan_interface": "eth1",
       "key_file": "~/.ssh/id_ed25519"}]
STATIC = {"kind": "enoslib", "static": {"hosts": H3}}
G5K = {"kind": "enoslib", "g5k": {"cluster": "paravance", "site": "rennes", "walltime": "02:00:00",
                                  "job_name": "juice-ks"}}
M3 = [[0, 50, 50], [50, 0, 10], [50, 10, 0]]


def error(data: object, sites: int = 3) -> str:
    with pytest.raises(UserError) as e:
        parse_provider(data, sites)
    assert e.value.exit_code == 2
    assert "\n" not in str(e.value)
    return str(e.value)


# ---- parsing -------------------------------------------------------------------------------------

def test_defaults_none_and_empty_are_the_local_provider() -> None:
    for data in (None, dict[str, object]()):
        p = parse_provider(data, 3)
        assert (p.kind, p.static, p.g5k, p.vagrant, p.netem, p.install, p.keep) == (
            "local", None, None, None, "auto", False, False)
        assert (p.control_network, p.wan_network) == ("control", "wan")


def test_static_host_defaults_and_normalisation() -> None:
    p = parse_provider(STATIC, 3)
    assert p.static is not None
    a, b, c = p.static.hosts
    assert (a.user, a.port, a.key_file, a.wan_address, a.wan_interface, a.python) == (
        "root", 22, None, None, None, "/usr/bin/python3")
    assert (b.user, b.port) == ("juice", 2222)
    assert a.known_wan() == "192.0.2.11" and c.known_wan() == "198.51.100.13"
    assert c.key_path() == Path.home() / ".ssh" / "id_ed25519"
    assert StaticHost(address="host-c.example").known_wan() is None


@pytest.mark.parametrize(("data", "sites", "expected"), [
    ({"kind": "enoslib", "static": {"hosts": H3[:2]}}, 3,
     "provider.static.hosts: 2 host(s) for 3 sites: give one host per site (site k = the k-th host)"),
    ({"kind": "enoslib"}, 3, "provider: kind enoslib needs exactly one of static, g5k, vagrant"),
    ({"kind": "enoslib", "static": {"hosts": H3}, "g5k": {"cluster": "x", "site": "y"}}, 3,
     "provider: kind enoslib needs exactly one of static, g5k, vagrant (got static and g5k)"),
    ({"static": {"hosts": H3}}, 3, "provider.static: only with kind: enoslib"),
    ({"kind": "local", "g5k": {}}, 3, "provider.g5k: only with kind: enoslib"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h"}, {"address": "H"}]}}, 2,
     "provider.static.hosts.1: H:22 is also hosts.0"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "192.0.2.1"},
                                              {"address": "192.0.2.1", "port": 2200}]}}, 2,
     "provider.static.hosts.1.wan_address: 192.0.2.1 is also the WAN address of hosts.0"),
    ({"kind": "enoslib", "static": {"hosts": []}}, 1, "provider.static.hosts: empty"),
    ({"kind": "enoslib", "static": {}}, 1, "provider.static.hosts: required field is missing"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "port": 70000}]}}, 1,
     "provider.static.hosts.0.port: must be <= 65535, got 70000"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "port": True}]}}, 1,
     "provider.static.hosts.0.port: expected an integer, got true"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "prot": 22}]}}, 1,
     "provider.static.hosts.0.prot: unknown key"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "192.0.2.300"}]}}, 1,
     "provider.static.hosts.0.address: not an IPv4 address: '192.0.2.300'"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "root@h"}]}}, 1,
     "provider.static.hosts.0.address: 'root@h': give the user in user:"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "2001:db8::1"}]}}, 1,
     "provider.static.hosts.0.address: IPv6 or host:port is not supported"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "wan_address": "h2"}]}}, 1,
     "provider.static.hosts.0.wan_address: not an IPv4 address: 'h2'"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "wan_interface": "eth 1"}]}}, 1,
     "provider.static.hosts.0.wan_interface: expected an interface name"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "python": "python3"}]}}, 1,
     "provider.static.hosts.0.python: expected an absolute path"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "user": "Bad User"}]}}, 1,
     "provider.static.hosts.0.user: expected a user name, got 'Bad User'"),
    ({"kind": "enoslib", "static": {"hosts": [{"address": "h", "key_file": ""}]}}, 1,
     "provider.static.hosts.0.key_file: expected a file path"),
    ({"kind": "k8s"}, 1, "provider.kind: Input should be 'local' or 'enoslib', got 'k8s'"),
    ({"kind": "enoslib", "static": {"hosts": H3}, "netem": "yes"}, 3, "provider.netem: "),
    ({"kind": "enoslib", "static": {"hosts": H3}, "install": True}, 3,
     "provider.install: true is reserved for a later version; prepare each host with scripts/setup.sh"),
    ({"kind": "enoslib", "static": {"hosts": H3}, "wan_network": "control"}, 3,
     "provider.wan_network: the same name as control_network"),
    ({"kind": "enoslib", "static": {"hosts": H3}, "wan_network": "W N"}, 3,
     "provider.wan_network: not a network name"),
    ({"kind": "enoslib", "g5k": {"site": "rennes"}}, 3, "provider.g5k.cluster: required"),
    ({"kind": "enoslib", "g5k": {"cluster": "paravance"}}, 3, "provider.g5k.site: required"),
    ({"kind": "enoslib", "g5k": {"cluster": "paravance", "site": "rennes", "walltim": "1:00:00"}}, 3,
     "provider.g5k.walltim: unknown key (EnOSlib 10.9.0's g5k keys: dhcp, env_name"),
    ({"kind": "enoslib", "g5k": {"cluster": "paravance", "site": "rennes", "walltime": 7200}}, 3,
     'provider.g5k.walltime: expected a string, got 7200 (quote it: walltime: "2:00:00"'),
    ({"kind": "enoslib", "g5k": {"cluster": "paravance", "site": "rennes", "walltime": "2h"}}, 3,
     "provider.g5k.walltime: expected HH:MM:SS, got '2h'"),
    ({"kind": "enoslib", "g5k": {"cluster": "p", "site": "r", "resources": {"machines": []}}}, 3,
     "provider.g5k.resources: only networks may be given"),
    ({"kind": "enoslib",
      "g5k": {"cluster": "p", "resources": {"networks": [{"id": "wan", "roles": ["wan"]}]}}}, 3,
     "provider.g5k.resources.networks: no network with id and role 'control'"),
    ({"kind": "enoslib", "vagrant": {"flavour": "huge"}}, 3,
     "provider.vagrant.flavour: 'huge' is not one of"),
    ({"kind": "enoslib", "vagrant": {"cidr": "10.0.0.0/33"}}, 3,
     "provider.vagrant.cidr: not an IPv4 network"),
    ({"kind": "enoslib", "vagrant": {"flavour": "tiny", "flavour_desc": {"core": 1, "mem": 512}}}, 3,
     "provider.vagrant.flavour_desc: give flavour or flavour_desc, not both"),
    ({"kind": "enoslib", "vagrant": {"box": float("nan")}}, 3,
     "provider.vagrant.box: expected a finite number"),
    ([1, 2], 3, "provider: expected a mapping (kind, static, g5k, vagrant, ...), got a list"),
])
def test_every_error_is_one_line_naming_its_field(data: object, sites: int, expected: str) -> None:
    assert error(data, sites).startswith(expected)


def test_where_prefixes_the_field_path() -> None:
    with pytest.raises(UserError, match=r"^lab\.provider\.static\.hosts\.0\.port: "):
        parse_provider({"kind": "enoslib", "static": {"hosts": [{"address": "h", "port": 0}]}}, 1,
                       where="lab.provider")
    with pytest.raises(UserError, match=r"^spec\.provider: kind enoslib needs"):
        parse_provider({"kind": "enoslib"}, 1, where="spec.provider")


# ---- static mapping ------------------------------------------------------------------------------

def test_site_k_is_the_kth_host_and_extra_hosts_stay_unused() -> None:
    p = parse_provider(STATIC, 2)
    assert [h.address for h in site_hosts(p, 2)] == ["192.0.2.11", "192.0.2.12"]
    assert [h.address for h in site_hosts(p, 3)] == ["192.0.2.11", "192.0.2.12", "host-c.example"]
    with pytest.raises(UserError, match=r"3 host\(s\) for 4 sites"):
        site_hosts(p, 4)
    with pytest.raises(ValueError, match="no static hosts"):
        site_hosts(parse_provider(G5K, 3), 3)


# ---- EnOSlib configurations (EnOSlib 10.9.0's schema keys) ----------------------------------------

def test_g5k_conf_golden() -> None:
    assert enoslib_conf(parse_provider(G5K, 2), 2) == {
        "walltime": "02:00:00", "job_name": "juice-ks", "job_type": ["deploy"], "env_name": "debian12-nfs",
        "resources": {
            "machines": [
                {"roles": ["site-1"], "cluster": "paravance", "nodes": 1, "primary_network": "control",
                 "secondary_networks": ["wan"]},
                {"roles": ["site-2"], "cluster": "paravance", "nodes": 1, "primary_network": "control",
                 "secondary_networks": ["wan"]}],
            "networks": [
                {"id": "control", "type": "prod", "roles": ["control"], "site": "rennes"},
                {"id": "wan", "type": "kavlan", "roles": ["wan"], "site": "rennes"}]}}


def test_g5k_conf_keeps_the_users_keys_and_networks() -> None:
    nets = [{"id": "ctl", "type": "prod", "roles": ["ctl"], "site": "nancy"},
            {"id": "w", "type": "kavlan-local", "roles": ["w"], "site": "nancy"}]
    p = parse_provider({"kind": "enoslib", "control_network": "ctl", "wan_network": "w",
                        "g5k": {"cluster": "gros", "job_type": ["deploy"], "env_name": "debian12-min",
                                "queue": "production", "resources": {"networks": nets}}}, 1)
    assert enoslib_conf(p, 1) == {
        "job_type": ["deploy"], "env_name": "debian12-min", "queue": "production", "job_name": "juice",
        "resources": {"machines": [{"roles": ["site-1"], "cluster": "gros", "nodes": 1,
                                    "primary_network": "ctl", "secondary_networks": ["w"]}],
                      "networks": nets}}


def test_vagrant_conf_golden() -> None:
    p = parse_provider({"kind": "enoslib", "vagrant": {"backend": "virtualbox", "flavour": "medium"}}, 2)
    assert enoslib_conf(p, 2) == {
        "backend": "virtualbox", "box": "generic/debian12",
        "resources": {"machines": [{"roles": ["site-1"], "flavour": "medium", "number": 1},
                                   {"roles": ["site-2"], "flavour": "medium", "number": 1}],
                      "networks": [{"cidr": "192.168.42.0/24", "roles": ["wan"]}]}}
    p = parse_provider({"kind": "enoslib", "vagrant": {
        "flavour_desc": {"core": 2, "mem": 4096}, "cidr": "10.77.0.0/24", "box": "debian/bookworm64"}}, 1)
    assert enoslib_conf(p, 1) == {
        "box": "debian/bookworm64",
        "resources": {"machines": [{"roles": ["site-1"], "flavour_desc": {"core": 2, "mem": 4096},
                                    "number": 1}],
                      "networks": [{"cidr": "10.77.0.0/24", "roles": ["wan"]}]}}


def test_enoslib_conf_is_only_for_g5k_and_vagrant() -> None:
    with pytest.raises(ValueError, match="only for provider g5k or vagrant"):
        enoslib_conf(parse_provider(STATIC, 3), 3)


# ---- dry-run plan --------------------------------------------------------------------------------

def test_plan_for_g5k_has_the_conf_and_per_site_tc_with_placeholders() -> None:
    text = render_plan(parse_provider(G5K, 3), 3, M3, jitter_ms=1)
    assert "provider: enoslib (g5k), EnOSlib 10.9.0" in text
    conf_lines = text.split("EnOSlib configuration (g5k):\n", 1)[1].split("sites:\n", 1)[0]
    assert yaml.safe_load(textwrap.dedent(conf_lines)) == enoslib_conf(parse_provider(G5K, 3), 3)
    assert "  site 2: role site-2" in text
    for k in (1, 2, 3):
        assert f"tc qdisc replace dev <wan-if-of-site-{k}> root handle 1: htb default 1" in text
        assert f"teardown: tc qdisc del dev <wan-if-of-site-{k}> root" in text
    assert ("tc qdisc replace dev <wan-if-of-site-2> parent 1:b handle b: netem delay 10ms 1ms limit 100000"
            in text)
    assert "u32 match ip dst <wan-address-of-site-3>/32 flowid 1:b" in text


def test_plan_for_static_uses_the_known_addresses_and_interfaces() -> None:
    text = render_plan(parse_provider(STATIC, 2), 2, [[0, 25], [25, 0]])
    assert "hosts: 3 (1 unused)" in text
    assert "site 1: root@192.0.2.11:22 WAN 192.0.2.11 on <detected>" in text
    assert "site 2: juice@192.0.2.12:2222 WAN 192.0.2.12 on <detected>" in text
    assert ("tc filter replace dev <wan-if-of-site-1> parent 1: protocol ip prio 1 handle 800::a u32 "
            "match ip dst 192.0.2.12/32 flowid 1:a") in text
    text = render_plan(parse_provider(STATIC, 3), 3, M3)
    assert "tc qdisc replace dev eth1 parent 1:a handle a: netem delay 50ms limit 100000" in text
    assert "match ip dst 198.51.100.13/32" in text


def test_plan_without_tc_for_the_userspace_delayer_and_for_lan_only() -> None:
    text = render_plan(parse_provider({**STATIC, "netem": "userspace"}, 2), 2, [[0, 5], [5, 0]])
    assert "tc qdisc" not in text
    assert "to 192.0.2.12/32: delay 5ms" in text
    lan = render_plan(parse_provider(STATIC, 2), 2, [[0, 0], [0, 0]])
    assert "0 delayed destination(s)" in lan and "tc qdisc" not in lan
    assert render_plan(parse_provider(None, 2), 2, [[0, 0], [0, 0]]).startswith("provider: local")
    with pytest.raises(ValueError, match="3x3"):
        render_plan(parse_provider(STATIC, 3), 3, [[0]])


# ---- reserve ---------------------------------------------------------------------------------------

def test_reserve_static_yields_the_site_hosts_and_needs_no_enoslib(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUICE_ENOSLIB_PYTHON", str(tmp_path / "missing"))
    with reserve(parse_provider(STATIC, 2), 2, tmp_path / "w") as hosts:
        assert [h.address for h in hosts] == ["192.0.2.11", "192.0.2.12"]
    assert not (tmp_path / "w").exists()


def test_reserve_without_enoslib_names_the_venv_to_make(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUICE_ENOSLIB_PYTHON", str(tmp_path / "no-such-python"))
    with pytest.raises(UserError) as e, reserve(parse_provider(G5K, 3), 3, tmp_path / "w"):
        pass
    assert e.value.exit_code == 2
    assert str(e.value).startswith("provider.kind enoslib with g5k needs EnOSlib 10.9.0")
    assert "pip install 'enoslib[vagrant]==10.9.0'" in str(e.value)
    # a Python where `import enoslib` fails (even if this one has it): the same error
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "enoslib.py").write_text("raise ImportError('No module named enoslib')\n")
    monkeypatch.setenv("JUICE_ENOSLIB_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(stub))
    with pytest.raises(UserError, match=r"with vagrant needs EnOSlib 10\.9\.0 .*No module named enoslib"), \
            reserve(parse_provider({"kind": "enoslib", "vagrant": {}}, 1), 1, tmp_path / "w"):
        pass
    assert not (tmp_path / "w" / "enoslib-log.txt").exists()


FAKE_ENOSLIB = '''
"""A stand-in for EnOSlib 10.9's API as enoslib_helper.py uses it; records calls in ./calls."""
import ipaddress, json, os
__version__ = "10.9.0\\n"
def _log(*a):
    with open("calls", "a") as f:
        f.write(json.dumps(a) + "\\n")
def set_config(**kw): _log("set_config", kw)
class G5kConf:
    @staticmethod
    def from_dictionary(d): _log("conf", d); return d
class Net:
    def __init__(self, cidr): self.network = ipaddress.ip_network(cidr)
class Addr:
    def __init__(self, a): self.ip = ipaddress.ip_interface(a)
class Dev:
    def __init__(self, name, addrs): self.name, self.addrs = name, [Addr(a) for a in addrs]
    def filter_addresses(self, nets): return [a for a in self.addrs for n in nets if a.ip in n.network]
class Host:
    def __init__(self, k):
        self.address, self.user, self.port = f"node-{k}.rennes.grid5000.fr", "root", None
        self.keyfile, self.extra = None, {}
        self.net_devices = [Dev("eno1", [f"172.16.0.{k}/20"]), Dev("eno2", [f"10.24.0.{k}/18", "fe80::1/64"])]
    def set_extra(self, **kw): self.extra.update(kw)
class Roles(dict):
    def all(self): return [h for hs in self.values() for h in hs]
class G5k:
    def __init__(self, conf): self.conf = conf
    def init(self):
        _log("init")
        if os.environ.get("FAKE_FAIL") == "init": raise RuntimeError("OAR: no resources left")
        n = len(self.conf["resources"]["machines"])
        nets = {"wan": [Net("10.24.0.0/18")], "control": [Net("172.16.0.0/20")]}
        return Roles({f"site-{k}": [Host(k)] for k in range(1, n + 1)}), nets
    def destroy(self):
        _log("destroy")
        if os.environ.get("FAKE_FAIL") == "destroy": raise RuntimeError("API down")
def sync_info(roles, networks):
    _log("sync_info", sorted(h.extra["ansible_python_interpreter"] for h in roles.all()))
    return roles
'''


@pytest.fixture
def fake_enoslib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "fake"
    (pkg / "enoslib").mkdir(parents=True)
    (pkg / "enoslib" / "__init__.py").write_text(FAKE_ENOSLIB)
    monkeypatch.setenv("JUICE_ENOSLIB_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(pkg))
    monkeypatch.delenv("FAKE_FAIL", raising=False)
    return tmp_path / "work"


def calls(work: Path) -> list[str]:
    return [json.loads(line)[0] for line in (work / "calls").read_text().splitlines()]


def test_reserve_g5k_maps_roles_to_hosts_and_destroys_on_exit(fake_enoslib: Path) -> None:
    work, said = fake_enoslib, list[str]()
    with reserve(parse_provider(G5K, 2), 2, work, said.append) as hosts:
        assert [(h.address, h.user, h.port, h.wan_address, h.wan_interface) for h in hosts] == [
            ("node-1.rennes.grid5000.fr", "root", 22, "10.24.0.1", "eno2"),
            ("node-2.rennes.grid5000.fr", "root", 22, "10.24.0.2", "eno2")]
        assert calls(work) == ["set_config", "conf", "init", "sync_info"]
    assert calls(work)[-1] == "destroy"
    first = json.loads((work / "calls").read_text().splitlines()[0])
    assert first == ["set_config", {"g5k_auto_jump": False}]
    request = json.loads((work / "enoslib-request.json").read_text())
    assert request["conf"] == enoslib_conf(parse_provider(G5K, 2), 2)
    assert said[-1] == "g5k: released"


def test_reserve_g5k_destroys_on_an_error_in_the_block_and_on_a_failed_init(
        fake_enoslib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = fake_enoslib
    with pytest.raises(RuntimeError, match="boom"), reserve(parse_provider(G5K, 1), 1, work):
        raise RuntimeError("boom")
    assert calls(work)[-1] == "destroy"
    monkeypatch.setenv("FAKE_FAIL", "init")
    with pytest.raises(LabError, match=r"could not reserve the machines: enoslib_helper up: RuntimeError: "
                                       r"OAR: no resources left \(log: .*enoslib-log.txt\)"), \
            reserve(parse_provider(G5K, 1), 1, work):
        pass
    assert calls(work)[-4:] == ["init", "set_config", "conf", "destroy"]  # up failed, then down


def test_reserve_g5k_keep_and_a_failed_release(fake_enoslib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work, said = fake_enoslib, list[str]()
    with reserve(parse_provider({**G5K, "keep": True}, 1), 1, work, said.append):
        pass
    assert "destroy" not in calls(work)
    assert "kept (provider.keep)" in said[-1] and "enoslib_helper.py down" in said[-1]
    monkeypatch.setenv("FAKE_FAIL", "destroy")
    with pytest.raises(LabError, match="could not release the reservation: .*API down"), \
            reserve(parse_provider(G5K, 1), 1, work):
        pass
    with pytest.raises(KeyError), reserve(parse_provider(G5K, 1), 1, work, said.append):
        raise KeyError("the block's own error wins")
    assert "could not release" in said[-1]
