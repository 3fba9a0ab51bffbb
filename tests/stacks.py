"""Deployments shared by several tests (session fixtures; ``tests/parallel.py`` keeps the tests
of one fixture on one pytest-xdist worker, so each is brought up once per suite).

- ``nova_cloud``: one real nova stack (MariaDB, RabbitMQ, Keystone, placement, the real
  glance-api with its image, neutron (ML2/OVN) with ovn-central, nova-api, conductor, a scheduler, a
  nova-compute of 20 simulated nodes in site 2, which download the image through glance at their
  first boot), published on loopback forwarders with a clouds.yaml, as a user's existing
  cloud would be. Tests that use it leave it as they found it (they boot and delete their own
  servers and images, under their own names; a test that kills a compute restarts it and waits
  for it).
- ``capacity_runs``: ``juice run`` of the accuracy spec (capacity for exactly K = 4 servers,
  K + 1 concurrent boots, with 2 schedulers; the 1-scheduler case runs on ``nova_cloud``): the
  results are only read, by the capacity test and by the trace test that follows its No valid
  host through the logs.

A deployment that fails to come up fails every test that uses it, with the server's log tail
(the ServiceError of ``up``), within the services' bounded waits.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.services.conftest import services_capable

COMPUTE_NODES = 20


@dataclass
class NovaCloud:
    """The shared stack: ``dep`` (a NovaDeployment), where it is published, its admin."""

    dep: Any               # juice.services.openstack.nova_deploy.NovaDeployment
    tmp: Path              # a directory for the tests' own files
    clouds: Path           # clouds.yaml with the one cloud "mycloud" (not a Juice lab to a run)
    auth: dict[str, Any]   # that cloud's auth section (admin)
    compute_url: str       # nova's API on a loopback forwarder


@pytest.fixture(scope="session")
def nova_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NovaCloud]:
    reason = services_capable()
    if reason:
        pytest.skip(reason)
    from juice.lab import LocalLab
    from juice.lab import spec as labspec
    from juice.services.openstack import keystone_publish as pub
    from juice.services.openstack.nova_conf import ComputeOptions, Computes
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack

    tmp = tmp_path_factory.mktemp("novacloud")
    # a name of its own: the tmp directory's is the same in every pytest process ("novacloud0"),
    # so a second suite on the machine (another clone's CI) found "ncloud0" already up
    ls = labspec.parse({"name": "nc" + secrets.token_hex(3), "sites": 2, "delay_ms": 1})
    stack = NovaStack(computes=ComputeOptions(Computes(processes=1, sites=[2], vcpus=2, memory_mb=2048,
                                                       nodes_per_process=COMPUTE_NODES, disk_gb=20)))
    with LocalLab.up(ls, ephemeral=True) as lab:
        dep = NovaDeployment(lab, stack=stack)
        forwarders = []
        try:
            dep.up()
            dep.client(1).ensure_flavor("juice-small", vcpus=1, ram_mb=256, disk_gb=1)
            ks, ks_port = pub.start_forwarder(lab, 1, 5000, tmp)
            forwarders.append(ks)
            nv, nova_port = pub.start_forwarder(lab, 1, 8774, tmp)
            forwarders.append(nv)
            doc = pub.clouds("x", {1: (ks_port, "Region1")}, dep.ks.admin_credentials())
            entry = doc["clouds"]["juice-x"]
            entry.pop("juice_lab")  # to a run, a cloud like any other
            clouds = tmp / "clouds.yaml"
            clouds.write_text(yaml.safe_dump({"clouds": {"mycloud": entry}}))
            yield NovaCloud(dep=dep, tmp=tmp, clouds=clouds, auth=entry["auth"],
                            compute_url=f"http://127.0.0.1:{nova_port}/v2.1")
        finally:
            pids = dep.pids()
            for f in forwarders:
                f.stop(grace_s=2)
            dep.stop()
        # Stopped by recorded pid: nothing of the stack runs any more, nothing is left in the
        # sites (the lab teardown would kill it otherwise).
        from juice.lab import netns
        from juice.util import proc

        alive = [p for p in pids if proc.alive(p)]
        in_sites = [p for k in lab.sites for p in netns.pids(lab.site_ns(k))]
        assert not alive and not in_sites, (alive, in_sites)


def nova_spec(tmp: Path, name: str, **over: Any) -> Path:
    """A small nova study spec (2 sites, 6 simulated nodes) with ``over`` on top."""
    data: dict[str, Any] = {"workload": "nova", "name": name, "results": str(tmp / "results" / name),
                            "sites": 2, "computes": {"processes": 1, "nodes_per_process": 6}}
    data.update(over)
    # no warm-up run unless a test asks (tests/sweep/test_sweep_warmup.py covers them): these
    # runs test the study's mechanics, and a run of nova is a suite's minute
    data["runner"] = {"warmup_runs": 0, **data.get("runner", {})}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@dataclass
class CapacityRuns:
    results: Path          # the study directory: one run
    code: int
    err: str


@pytest.fixture(scope="session")
def capacity_runs(tmp_path_factory: pytest.TempPathFactory) -> CapacityRuns:
    """2 nodes x 2 vCPUs and a 1-vCPU flavor: exactly K = 4 servers fit; 5 boot at once with
    2 schedulers (the case where two schedulers could both place on the last room; the
    1-scheduler case runs on the shared ``nova_cloud``: one deployment instead of two keeps the
    suite's time)."""
    reason = services_capable()
    if reason:
        pytest.skip(reason)
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("capacity")
    spec = nova_spec(tmp, "acc", computes={"processes": 1, "nodes_per_process": 2, "vcpus": 2},
                     flavor={"vcpus": 1, "ram_mb": 256, "disk_gb": 1}, schedulers=[2],
                     scenarios=["boot_server"], runner={"times": 5, "concurrency": [5]},
                     # placement with Juice's defaults (2 workers, allocation_conflict_retry_count
                     # 1: with placement's 10, concurrent claims over-allocated; docs/server-settings.md)
                     allow_over_capacity=True, poll_interval_s=0.5,
                     # the real glance (its downloads are checked here); the network service is
                     # the named stand-in: capacity is placement's and the scheduler's subject, and
                     # a real neutron costs a minute per stack (it is tested on nova_cloud and in
                     # the CLI run)
                     network_service="fake-neutron")
    exe = Path(sys.executable).parent / "juice"
    cp = subprocess.run([str(exe), "run", str(spec), "--no-report"], capture_output=True, text=True,
                        timeout=1200, stdin=subprocess.DEVNULL, check=False)
    return CapacityRuns(results=tmp / "results" / "acc", code=cp.returncode,
                        err=(cp.stdout + cp.stderr)[-4000:])
