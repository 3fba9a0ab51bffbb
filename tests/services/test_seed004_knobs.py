"""Seed 004's knobs reach the servers' config files, from the nova spec's ``server:`` (or a
configuration) through the study's stack to what each server reads: nova's
``vif_plugging_timeout`` / ``vif_plugging_is_fatal``, neutron-api's workers and ``rpc_workers``,
Keystone's workers and keystonemiddleware's ``memcached_servers`` (nova, glance, neutron). Pure:
no server, no root."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import pytest

from juice.errors import UserError
from juice.services.openstack.glance import render_glance_conf
from juice.services.openstack.neutron import render_neutron_conf
from juice.services.openstack.nova_conf import ComputeOptions, ConfContext, NovaOptions, render_nova_conf
from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack
from juice.services.openstack.nova_settings import nova_deviations
from juice.studies.nova.points import expand
from juice.studies.nova.spec import parse
from juice.studies.nova.study import _stack
from tests.services.conftest import FakeSites

CTX = ConfContext(transport_url="rabbit://j:j@10.210.1.2:5672/", api_db_url="mysql+pymysql://h/nova_api",
                  cell_db_url="mysql+pymysql://h/nova_cell1", auth_url="http://10.210.1.2:5000/v3",
                  region="Region1", password="pw", state_root="/w/nova")
SET = {"vif_plugging_timeout": 120, "vif_plugging_is_fatal": False, "neutron_api_workers": 3,
       "neutron_rpc_workers": 0, "keystone_workers": 2, "authtoken_memcached": True}


class Sites(FakeSites):
    """FakeSites with a place per site (a root: what the config paths are made of)."""

    class _Place:
        root = Path("/w")

    def place(self, site: int) -> Any:
        return self._Place()


def ini(text: str) -> configparser.RawConfigParser:
    cp = configparser.RawConfigParser(default_section="-")
    cp.read_string(text)
    return cp


def spec(**server: Any) -> Any:
    return parse({"workload": "nova", "name": "k", "scenarios": ["boot_server"],
                  "computes": {"processes": 1, "nodes_per_process": 2},
                  **({"server": server} if server else {})}, "k.yaml")


def deployment(**server: Any) -> NovaDeployment:
    s = spec(**server)
    return NovaDeployment(Sites(), stack=_stack(s, expand(s)[0]))  # type: ignore[arg-type]


def test_unset_knobs_leave_every_file_as_shipped() -> None:
    dep = deployment()
    nova = ini(render_nova_conf("compute", dep.nova.context(2), dep.nova.opts, host="c",
                                comp=ComputeOptions()))
    assert not {"vif_plugging_timeout", "vif_plugging_is_fatal"} & set(nova["DEFAULT"])
    assert "memcached_servers" not in nova["keystone_authtoken"]
    assert dep.neutron is not None and dep.glance is not None
    n = dep.neutron
    assert (n.api_workers, n.rpc_workers, n.authtoken_memcached) == (1, None, None)
    assert dep.glance.authtoken_memcached is None and dep.ks.opts.workers == 1
    names = {d.option for d in dep.deviations()}
    assert not any("vif_plugging" in n or "memcached_servers" in n or "rpc_workers" in n for n in names)


def test_each_knob_flows_from_the_spec_to_the_config_files() -> None:
    dep = deployment(**SET)
    assert dep.neutron is not None and dep.glance is not None
    nova = ini(render_nova_conf("compute", dep.nova.context(2), dep.nova.opts, host="c",
                                comp=ComputeOptions()))
    assert nova["DEFAULT"]["vif_plugging_timeout"] == "120"
    assert nova["DEFAULT"]["vif_plugging_is_fatal"] == "false"
    cache = "10.210.1.2:11211"  # Keystone's memcached in the control site
    assert nova["keystone_authtoken"]["memcached_servers"] == cache
    api = ini(render_nova_conf("api", dep.nova.context(1), dep.nova.opts, host="juice-api"))
    assert api["keystone_authtoken"]["memcached_servers"] == cache
    neutron = ini(render_neutron_conf(
        db_url="mysql+pymysql://h/neutron", transport_url="rabbit://x", auth_url="http://k:5000/v3",
        region="Region1", password="pw", state="/s1/neutron", api_workers=dep.neutron.api_workers,
        rpc_workers=dep.neutron.rpc_workers, authtoken_memcached=dep.neutron.authtoken_memcached))
    assert neutron["DEFAULT"]["rpc_workers"] == "0" and neutron["DEFAULT"]["api_workers"] == "3"
    assert neutron["keystone_authtoken"]["memcached_servers"] == cache
    assert dep.neutron._env()["ASGI_WORKERS"] == "3"  # what the OVN hash ring reads
    glance = ini(render_glance_conf(db_url="mysql+pymysql://h/glance", auth_url="http://k:5000/v3",
                                    password="pw", home=Path("/g"),
                                    authtoken_memcached=dep.glance.authtoken_memcached))
    assert glance["keystone_authtoken"]["memcached_servers"] == cache
    assert dep.ks.opts.workers == 2
    options = {(d.server, d.option): d.value for d in dep.deviations()}
    assert options[("nova", "[DEFAULT] vif_plugging_timeout")] == "120"
    assert options[("nova", "[DEFAULT] vif_plugging_is_fatal")] == "false"
    assert options[("neutron-api gunicorn", "--workers (ASGI_WORKERS)")] == "3"
    assert options[("neutron", "[DEFAULT] rpc_workers")] == "0"
    assert options[("keystone gunicorn", "--workers")] == "2"
    for server in ("nova-api, nova-compute", "neutron", "glance-api"):
        assert options[(server, "[keystone_authtoken] memcached_servers")] == cache


def test_a_configuration_sets_them_too_and_they_are_in_the_run_key() -> None:
    s = parse({"workload": "nova", "name": "k", "scenarios": ["boot_server"],
               "computes": {"processes": 1, "nodes_per_process": 2},
               "configurations": {"shipped": {}, "fixed": {"neutron_api_workers": 4}}}, "k.yaml")
    shipped, fixed = expand(s)
    assert shipped.key != fixed.key and fixed.fixed["server"] == {"neutron_api_workers": 4}
    assert _stack(s, shipped).neutron_workers == 1 and _stack(s, fixed).neutron_workers == 4


def test_shipped_values_set_explicitly_are_not_deviations() -> None:
    opts = NovaOptions(vif_plugging_timeout=300, vif_plugging_is_fatal=True)
    names = {d.option for d in nova_deviations(opts)}
    assert not any("vif_plugging" in n for n in names)


@pytest.mark.parametrize(("field", "value"), [("vif_plugging_timeout", -1), ("vif_plugging_timeout", 3601),
                                              ("neutron_api_workers", 0), ("neutron_rpc_workers", -1),
                                              ("keystone_workers", 65), ("authtoken_memcached", "yes")])
def test_bad_values_are_named(field: str, value: object) -> None:
    with pytest.raises(UserError, match=f"server.{field}"):
        spec(**{field: value})


def test_authtoken_memcached_needs_keystones_cache() -> None:
    from dataclasses import replace

    from juice.services.openstack.keystone import Keystone

    class NoCache(NovaStack):
        def keystone(self) -> Any:
            return replace(super().keystone(), cache=False)

    with pytest.raises(UserError, match="authtoken_memcached"):
        NovaDeployment(FakeSites(), stack=NoCache(authtoken_memcached=True))  # type: ignore[arg-type]
    assert Keystone  # imported: the class whose memcached is used
