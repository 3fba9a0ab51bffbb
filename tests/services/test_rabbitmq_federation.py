"""RabbitMQ federation: pure renderers and option checks; then 3 real brokers (one per site,
5 ms one-way) meshed by the federation plugin, with REAL oslo.messaging 18.3.1 RPC servers
(messaging venv) in every site, each on its own site's broker, and a client in site 1:
calls/casts stay local while site 1 has a server, are served remotely once it has none,
directed calls and replies cross brokers, fanouts reach every server exactly once."""

from __future__ import annotations

import json
import os
import queue
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from juice.errors import ServiceError
from juice.lab import LocalLab, spec
from juice.services.buses.rabbitmq import plan_nodes, render_plugins
from juice.services.buses.rabbitmq_federation import (
    MESSAGING_PY,
    QUEUE_PATTERN,
    RabbitFederation,
    render_declare,
    render_policies,
    render_upstreams,
)
from juice.util import proc
from tests.services.conftest import FakeSites, needs_lab

IPS = {1: "10.210.1.2", 2: "10.210.2.2", 3: "10.210.3.2"}


def test_upstreams_full_mesh() -> None:
    nodes = plan_nodes([1, 2, 3], IPS)
    argvs = render_upstreams(nodes[1], nodes)
    assert [a[4] for a in argvs] == ["site1-juice1", "site3-juice3"]  # every OTHER broker
    d = json.loads(argvs[0][-1])
    assert d["uri"] == "amqp://juice:juice@10.210.1.2:5672"
    assert (d["prefetch-count"], d["ack-mode"], d["max-hops"]) == (1000, "on-confirm", 1)
    with pytest.raises(ServiceError, match="ack_mode"):
        render_upstreams(nodes[0], nodes, ack_mode="later")


def test_policies_and_declarations() -> None:
    import re

    names = {a[7]: (a[4], a[8], json.loads(a[9])) for a in render_policies("nova")}
    assert names["juice-fed-ae"] == ("exchanges", "^nova$", {"alternate-exchange": "juice.remote"})
    assert names["juice-fed-queues"][2] == {"federation-upstream-set": "all"}
    q = re.compile(QUEUE_PATTERN)
    for federated in ("compute", "compute.host1", "reply_0123abcd"):
        assert q.match(federated)
    for local in ("amq.gen-x", "compute_fanout_0123abcd", "federation: compute_fanout -> s2"):
        assert not q.match(local)
    d = render_declare(["compute"])
    assert (d["exchange"], d["durable"], d["arguments"], d["queues"]) == ("openstack", False, {},
                                                                         ["compute"])
    assert render_declare(["c"], "quorum")["arguments"] == {"x-queue-type": "quorum"}
    with pytest.raises(ServiceError, match="mirrored"):
        render_declare(["c"], "mirrored")
    assert render_plugins(["rabbitmq_federation"]) == "[rabbitmq_federation].\n"
    assert render_plugins([]) == "[].\n"


def test_options_checked() -> None:
    fed = RabbitFederation(FakeSites(), sites=[1, 2])  # type: ignore[arg-type]
    assert fed.kind == "rabbitmq-federation" and not fed.cluster and fed.plugins == ["rabbitmq_federation"]
    assert fed.url(2) == "rabbit://juice:juice@10.210.2.2:5672/"
    with pytest.raises(ServiceError, match="listed twice"):
        RabbitFederation(FakeSites(), sites=[1, 1])  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="sites: 4 is not a site"):
        RabbitFederation(FakeSites(), sites=[1, 4])  # type: ignore[arg-type]


# argv: server URL TOPIC NAME SITE RELEASE | client URL TOPIC TAG NCALLS NCASTS NFANOUT DIRECT
# A server prints one JSON line per cast/fanout it processes (as it happens), until RELEASE
# exists (bounded); a client prints one JSON line: its calls (rtt, serving site), directed
# calls, errors.
AGENT = r"""
import json, os, sys, threading, time
import oslo_messaging as om
from oslo_config import cfg

mode, url, topic = sys.argv[1], sys.argv[2], sys.argv[3]
conf = cfg.CONF
conf([], project="juice-fed", default_config_files=[], default_config_dirs=[])
transport = om.get_rpc_transport(conf, url=url)
lock = threading.Lock()


def say(d):
    with lock:
        print(json.dumps(d), flush=True)


if mode == "server":
    name, site, release = sys.argv[4], int(sys.argv[5]), sys.argv[6]

    class Endpoint:
        def echo(self, ctxt, i):
            return {"site": site, "server": name}

        def note(self, ctxt, cid):
            say({"srv": name, "site": site, "m": "cast", "id": cid})

        def fan(self, ctxt, fid):
            say({"srv": name, "site": site, "m": "fan", "id": fid})

    server = om.get_rpc_server(transport, om.Target(topic=topic, server=name), [Endpoint()],
                               executor="threading")
    server.start()
    say({"ready": name})
    deadline = time.monotonic() + 170
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)
    server.stop()
    server.wait()
else:
    tag, ncalls, ncasts, nfans = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    direct = [s for s in sys.argv[8].split(",") if s]
    client = om.get_rpc_client(transport, om.Target(topic=topic), timeout=20)
    calls, directed, errors = [], [], []
    for i in range(ncalls):
        t = time.monotonic()
        try:
            r = client.call({}, "echo", i=i)
            calls.append({"rtt": time.monotonic() - t, "site": r["site"]})
        except Exception as e:
            errors.append(f"call {i}: {type(e).__name__}: {e}")
    for s in direct:
        t = time.monotonic()
        try:
            r = client.prepare(server=s).call({}, "echo", i=-1)
            directed.append({"to": s, "rtt": time.monotonic() - t, "server": r["server"]})
        except Exception as e:
            errors.append(f"directed {s}: {type(e).__name__}: {e}")
    for i in range(ncasts):
        client.cast({}, "note", cid=f"{tag}-c{i}")
        time.sleep(0.005)  # paced: a backlog would only measure itself
    for i in range(nfans):
        client.prepare(fanout=True).cast({}, "fan", fid=f"{tag}-f{i}")
    say({"calls": calls, "directed": directed, "errors": errors})
    transport.cleanup()
"""
TOPIC = "juice-fed"
no_venv = pytest.mark.skipif(not MESSAGING_PY.exists(),
                             reason=f"{MESSAGING_PY} missing: run scripts/setup.sh (messaging venv)")


def _reader(stream: IO[bytes], out: queue.Queue[dict[str, Any]]) -> None:
    for line in stream:
        try:
            out.put(json.loads(line))
        except ValueError:
            continue


def _collect(events: queue.Queue[dict[str, Any]], want: int, timeout: float) -> list[dict[str, Any]]:
    """Server events until ``want`` arrived (bounded), then 1 s more to catch duplicates."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    settle: float | None = None
    while True:
        now = time.monotonic()
        if len(got) >= want and settle is None:
            settle = now + 1.0
        end = settle if settle is not None else deadline
        if now >= end:
            return got
        try:
            got.append(events.get(timeout=end - now))
        except queue.Empty:
            return got


def _client(lab: LocalLab, fed: RabbitFederation, tag: str, calls: int, casts: int, fans: int,
            direct: str = "") -> dict[str, Any]:
    cp = lab.run(1, [str(MESSAGING_PY), "-c", AGENT, "client", fed.url(1), TOPIC, tag, str(calls),
                     str(casts), str(fans), direct], check=False, timeout=150)
    assert cp.returncode == 0, cp.stderr[-2000:]
    res: dict[str, Any] = json.loads(cp.stdout.strip().splitlines()[-1])
    assert res["errors"] == []
    return res


def _once(events: list[dict[str, Any]], m: str) -> dict[str, list[str]]:
    """id -> the servers that processed it."""
    out: dict[str, list[str]] = {}
    for e in events:
        if e.get("m") == m:
            out.setdefault(e["id"], []).append(e["srv"])
    return out


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
@no_venv
def test_federation_oslo_messaging_real(lab_name: str, tmp_path: Path) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 3, "delay_ms": 5}), ephemeral=True) as lab:
        fed = RabbitFederation(lab, sites=[1, 2, 3], topics=[TOPIC])
        servers: dict[int, subprocess.Popen[bytes]] = {}
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        errs = []
        try:
            fed.up(timeout=120)
            pids = [r.pid for r in fed.records()]
            for s in (1, 2, 3):
                err = (tmp_path / f"s{s}.err").open("wb")
                errs.append(err)
                p = lab.popen(s, [str(MESSAGING_PY), "-c", AGENT, "server", fed.url(s), TOPIC, f"s{s}",
                                  str(s), str(tmp_path / f"release-s{s}")], stdout=subprocess.PIPE,
                              stderr=err)
                servers[s] = p
                assert p.stdout is not None
                threading.Thread(target=_reader, args=(p.stdout, events), daemon=True).start()
            ready = _collect(events, 3, 60)
            assert sorted(e.get("ready", "") for e in ready) == ["s1", "s2", "s3"], \
                (tmp_path / "s1.err").read_text()[-2000:]

            # --- A: servers in all 3 sites, the client in site 1 ---------------------------
            a = _client(lab, fed, "a", 40, 40, 5, "s2,s3")
            ev_a = _collect(events, 40 + 5 * 3, 30)
            load_a = os.getloadavg()[0]
            counters = fed.counters()
            casts_a, fans_a = _once(ev_a, "cast"), _once(ev_a, "fan")
            call_local = sum(c["site"] == 1 for c in a["calls"]) / len(a["calls"])
            cast_local = sum(v == ["s1"] for v in casts_a.values()) / 40
            rtt_local = statistics.median(c["rtt"] for c in a["calls"] if c["site"] == 1)
            assert call_local >= 0.95 and cast_local >= 0.95, (call_local, cast_local)
            assert sorted(casts_a) == sorted(f"a-c{i}" for i in range(40))
            assert all(len(v) == 1 for v in casts_a.values()), casts_a   # exactly once
            assert {k: sorted(v) for k, v in fans_a.items()} == \
                {f"a-f{i}": ["s1", "s2", "s3"] for i in range(5)}        # every server once
            assert [(d["to"], d["server"]) for d in a["directed"]] == [("s2", "s2"), ("s3", "s3")]
            for name, c in counters.items():
                assert c["federation_links"] >= 4 and c["federation_running"] == c["federation_links"], \
                    (name, c)
                assert c["connections"] >= 1, (name, c)

            # --- B: site 1's server gone: served remotely ----------------------------------
            (tmp_path / "release-s1").touch()
            assert servers[1].wait(timeout=60) == 0, (tmp_path / "s1.err").read_text()[-2000:]
            b = _client(lab, fed, "b", 30, 30, 3)
            ev_b = _collect(events, 30 + 3 * 2, 30)
            load_b = os.getloadavg()[0]
            casts_b, fans_b = _once(ev_b, "cast"), _once(ev_b, "fan")
            assert len(b["calls"]) == 30 and {c["site"] for c in b["calls"]} <= {2, 3}
            assert sorted(casts_b) == sorted(f"b-c{i}" for i in range(30))
            assert all(len(v) == 1 and v[0] in ("s2", "s3") for v in casts_b.values()), casts_b
            assert {k: sorted(v) for k, v in fans_b.items()} == {f"b-f{i}": ["s2", "s3"] for i in range(3)}
            rtt_remote = statistics.median(c["rtt"] for c in b["calls"])
            by_site = {s: sum(c["site"] == s for c in b["calls"]) for s in (2, 3)}
            directed = ", ".join(f"{d['rtt'] * 1e3:.1f}" for d in a["directed"])
            print(f"\nfederation, servers in sites 1-3, client in site 1: {call_local:.0%} of calls "
                  f"and {cast_local:.0%} of casts served locally; call median {rtt_local * 1e3:.1f} ms "
                  f"(load {load_a:.2f}); directed to s2/s3: {directed} ms")
            print(f"no server in site 1: 30/30 calls served remotely {by_site}, median "
                  f"{rtt_remote * 1e3:.1f} ms, first {b['calls'][0]['rtt'] * 1e3:.1f} ms "
                  f"(load {load_b:.2f}); casts once each {len(casts_b)}/30; timings {fed.timings}")
            print(f"counters {counters}")

            # --- C: site 3's broker crashes and comes back (re-declared, links re-formed) ------
            killed = fed.kill(3)
            back = fed.restart(3, timeout=90)
            deadline = time.monotonic() + 60
            while True:
                c3 = fed.counters()
                if all(c["federation_running"] == c["federation_links"] > 0 for c in c3.values()) \
                        or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert all(c["federation_running"] == c["federation_links"] > 0 for c in c3.values()), c3
            c = _client(lab, fed, "c", 10, 10, 0)
            ev_c = _collect(events, 10, 30)
            casts_c = _once(ev_c, "cast")
            assert len(c["calls"]) == 10 and {x["site"] for x in c["calls"]} <= {2, 3}
            assert sorted(casts_c) == sorted(f"c-c{i}" for i in range(10))
            assert all(len(v) == 1 for v in casts_c.values()), casts_c
            pids += [back["pid"]]
            print(f"site 3's broker killed (pid {killed['pid']}) and back in {back['rejoin_s']:.1f} s; "
                  f"calls by site {({s: sum(x['site'] == s for x in c['calls']) for s in (2, 3)})}")
        finally:
            for s in (1, 2, 3):
                (tmp_path / f"release-s{s}").touch()
            for p in servers.values():
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
            for err in errs:
                err.close()
            fed.stop()
        assert pids and not any(proc.alive(p) for p in pids)
