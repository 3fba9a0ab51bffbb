"""The netem backend's tc commands, run against the real kernel.

This machine's kernel has no sch_netem, so the htb classes and u32 filters are checked with
each netem leaf swapped for a pfifo (same handles); where netem exists the real leaves are
installed and changed in place too.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from juice.lab import netns, spec, wanrender
from juice.lab.topology import Topology
from juice.lab.wan import netem_available
from tests.conftest import lab_capable

pytestmark = [pytest.mark.root, pytest.mark.skipif(lab_capable() is not None,
                                                    reason=lab_capable() or "")]


@pytest.fixture
def core(lab_name: str) -> Iterator[str]:
    ns = f"juice-{lab_name}-core"
    netns.add(ns)
    try:
        for k in (1, 2, 3):
            netns.ip(ns, "link", "add", f"s{k}", "type", "veth", "peer", "name", f"p{k}")
            netns.ip(ns, "link", "set", f"s{k}", "up")
        yield ns
    finally:
        netns.delete(ns)


def _tc(ns: str, cmd: list[str], real_netem: bool) -> None:
    if not real_netem and "netem" in cmd:
        cmd = [*cmd[:cmd.index("netem")], "pfifo", "limit", "1000"]
    cp = subprocess.run(netns.exec_argv(ns, cmd), capture_output=True, text=True, check=False)
    assert cp.returncode == 0, f"{' '.join(cmd)}: {cp.stderr}"


def test_netem_setup_builds_one_class_and_filter_per_source(core: str) -> None:
    real = netem_available(core)
    s = spec.parse({"sites": 3, "delay_ms": 5, "jitter_ms": 1, "loss_pct": 1})
    topo, links = Topology("x", 3), spec.links(s)
    for cmd in wanrender.netem_setup(topo, links):
        _tc(core, cmd, real)
    filters = subprocess.run(netns.exec_argv(core, ["tc", "filter", "show", "dev", "s3"]),
                             capture_output=True, text=True, check=True).stdout
    # Sources 1 and 2 reach site 3 through classes 1:11 and 1:12, matched on 10.210.{1,2}.0/24.
    assert "flowid 1:11" in filters and "match 0ad20100/ffffff00 at 12" in filters
    assert "flowid 1:12" in filters and "match 0ad20200/ffffff00 at 12" in filters
    qdiscs = subprocess.run(netns.exec_argv(core, ["tc", "qdisc", "show", "dev", "s3"]),
                            capture_output=True, text=True, check=True).stdout
    assert "qdisc htb 1: root" in qdiscs
    assert ("netem" if real else "pfifo") in qdiscs
    if real:
        for cmd in wanrender.netem_update(topo, spec.links(spec.parse({"sites": 3, "delay_ms": 7}))):
            _tc(core, cmd, real)
