"""RabbitMQ: pure renderers; a real node (AMQP publish/consume from a site); a real 3-site
cluster (join, kill + rejoin); nothing left running afterwards (beam.smp and epmd, by pid)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from juice.errors import ServiceError
from juice.lab import LocalLab, spec
from juice.services.buses.rabbitmq import (
    RabbitMQ,
    node_env,
    oslo_options,
    plan_nodes,
    render_conf,
    render_policies,
)
from juice.services.openstack.keystone import VENV
from juice.util import proc
from tests.services.conftest import needs_lab

IPS = {1: "10.210.1.2", 2: "10.210.2.2"}


def test_plan_nodes_same_site_gets_next_ports() -> None:
    nodes = plan_nodes([1, 2, 1], IPS)
    assert [n.name for n in nodes] == ["juice1@10.210.1.2", "juice2@10.210.2.2", "juice3@10.210.1.2"]
    assert [(n.amqp_port, n.dist_port) for n in nodes] == [(5672, 25672), (5672, 25672), (5673, 25673)]
    assert {n.epmd_port for n in nodes} == {24369}  # one private epmd port per deployment


def test_render_conf_and_env() -> None:
    n = plan_nodes([2], IPS)[0]
    conf = render_conf(n)
    assert "listeners.tcp.1 = 10.210.2.2:5672" in conf
    assert "loopback_users = none" in conf and "default_user = juice" in conf
    assert "default_permissions.configure = .*" in conf
    env = node_env(n, Path("/w/h"))
    assert env["RABBITMQ_NODENAME"] == "juice1@10.210.2.2" and env["RABBITMQ_USE_LONGNAME"] == "true"
    assert env["ERL_EPMD_PORT"] == "24369" and env["RABBITMQ_DIST_PORT"] == "25672"
    assert "inet_dist_use_interface {10,210,2,2}" in env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
    assert "-start_epmd false" in env["RABBITMQ_CTL_ERL_ARGS"]
    assert env["HOME"] == "/w/h" and env["RABBITMQ_MNESIA_BASE"] == "/w/h/mnesia"


def test_policies_per_flavour() -> None:
    assert render_policies("classic") == [] and render_policies("quorum") == []
    (argv,) = render_policies("mirrored")
    assert argv[0] == "set_policy" and json.loads(argv[-1])["ha-mode"] == "all"
    assert oslo_options("quorum") == {"rabbit_quorum_queue": "true"} and oslo_options("classic") == {}
    with pytest.raises(ServiceError, match="queues: expected"):
        render_policies("stream")


class _FakeSites:
    sites = range(1, 3)

    def site_ip(self, site: int) -> str:
        return IPS[site]


def test_urls_and_unknown_site() -> None:
    mq = RabbitMQ(_FakeSites(), nodes=[1, 2])  # type: ignore[arg-type]
    assert mq.url(2) == "rabbit://juice:juice@10.210.2.2:5672/"
    assert mq.urls_all(2) == "rabbit://juice:juice@10.210.2.2:5672,juice:juice@10.210.1.2:5672/"
    with pytest.raises(ServiceError, match="nodes: 5"):
        RabbitMQ(_FakeSites(), nodes=[5])  # type: ignore[arg-type]


AMQP = """
import json, sys, time, amqp
host, mode = sys.argv[1], sys.argv[2]
c = amqp.Connection(host=host, userid="juice", password="juice", virtual_host="/", connect_timeout=10)
c.connect()
ch = c.channel()
ch.queue_declare("juice-test", durable=False, auto_delete=False)
out = []
if mode == "publish":
    for i in range(5):
        ch.basic_publish(amqp.Message(f"m{i}"), routing_key="juice-test")
elif mode == "hold":  # stay connected (one connection, one channel) until killed
    print("connected", flush=True)
    time.sleep(60)
else:
    for _ in range(5):
        m = ch.basic_get("juice-test", no_ack=True)
        out.append(m.body if m is not None else None)
c.close()
print(json.dumps(out))
"""


def _amqp(lab: LocalLab, site: int, host: str, mode: str) -> list[str]:
    py = VENV / "bin" / "python"
    cp = lab.run(site, [str(py), "-c", AMQP, host, mode], timeout=30)
    return list(json.loads(cp.stdout))


def _gone(pids: list[int]) -> bool:
    return not any(proc.alive(p) for p in pids)


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_single_node_amqp_real(lab_name: str) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2, "delay_ms": 5}), ephemeral=True) as lab:
        mq = RabbitMQ(lab, nodes=[1])
        pids: list[int] = []
        try:
            mq.up(timeout=60)
            recs = mq.records()
            pids = [r.pid for r in recs]
            comms = {r.kind: Path(f"/proc/{r.pid}/comm").read_text().strip() for r in recs}
            assert comms == {"rabbitmq": "beam.smp", "rabbitmq-epmd": "epmd"}
            if not (VENV / "bin" / "python").exists():
                pytest.skip(f"no AMQP client: {VENV} missing (scripts/setup.sh)")
            host = f"{lab.site_ip(1)}:5672"
            assert _amqp(lab, 2, host, "publish") == []  # from the other site, across the WAN
            holder = lab.popen(2, [str(VENV / "bin" / "python"), "-c", AMQP, host, "hold"],
                               stdout=subprocess.PIPE)
            try:
                assert holder.stdout is not None and holder.stdout.readline() == b"connected\n"
                c = mq.counters()["juice1@" + lab.site_ip(1)]
            finally:
                holder.kill()
                holder.wait(timeout=10)
            assert c == {"queues": 1, "connections": 1, "channels": 1, "messages_ready": 5,
                         "messages_unacked": 0, "shared_queues": ["juice-test"]}
            assert _amqp(lab, 2, host, "consume") == [f"m{i}" for i in range(5)]
            facts = mq.facts()
            assert facts["version"].startswith("3.") and facts["erlang"][0].isdigit()
        finally:
            mq.stop()
        assert pids and _gone(pids) and mq.records() == []


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_cluster_of_three_kill_rejoin_real(lab3: LocalLab) -> None:
    mq = RabbitMQ(lab3, nodes=[1, 2, 3], queues="mirrored")
    pids: list[int] = []
    try:
        mq.up(timeout=120)
        pids = [r.pid for r in mq.records()]
        want = sorted(n.name for n in mq.nodes)
        assert mq.cluster_nodes(mq.nodes[2]) == want
        assert "ha-all" in mq.ctl(mq.nodes[0], "list_policies")
        assert {k for k in mq.timings if k.endswith("join_s")} == {"juice2.join_s", "juice3.join_s"}
        killed = mq.kill(2)
        assert not proc.alive(killed["pid"])
        assert mq.cluster_nodes(mq.nodes[0]) == sorted(set(want) - {mq.nodes[1].name})
        back = mq.restart(2, timeout=90)
        assert back["pid"] != killed["pid"] and mq.cluster_nodes(mq.nodes[0]) == want
        pids.append(back["pid"])
    finally:
        mq.stop()
    assert len(pids) == 7 and _gone(pids)  # 3 nodes + 3 epmds + the restarted node
