"""NATS: the pure config renderer; real servers in a 3-site lab as one cluster and as a
super-cluster of per-site clusters, with the queue-group locality each gives, a crash and a
restart, and nothing left running."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from juice.errors import ServiceError
from juice.lab import LocalLab
from juice.services.base import from_site
from juice.services.buses.nats import Nats, expected, formed, plan, render_config, version
from juice.util import proc
from tests.services.conftest import needs_lab

IPS = {1: "10.210.1.2", 2: "10.210.2.2", 3: "10.210.3.2"}


# ---- pure ------------------------------------------------------------------------------------

def test_render_cluster_routes_to_every_other_server() -> None:
    nodes = plan([1, 2, 3], IPS, servers_per_site=2)
    me = nodes[0]
    conf = render_config(me, nodes, "cluster")
    assert 'server_name: "juice-nats-s1-0"' in conf
    assert 'listen: "10.210.1.2:4222"' in conf and 'http: "10.210.1.2:8222"' in conf
    assert 'name: "juice"' in conf and "gateway" not in conf
    assert conf.count("nats-route://") == 5 and "nats-route://10.210.1.2:6222" not in conf
    assert "nats-route://10.210.1.2:6223" in conf and "nats-route://10.210.3.2:6223" in conf
    assert expected(me, nodes, "cluster") == (5, [])


def test_render_gateways_one_cluster_per_site() -> None:
    nodes = plan([1, 2, 3], IPS, servers_per_site=2)
    me = nodes[3]  # site 2, index 1
    conf = render_config(me, nodes, "gateways")
    assert 'listen: "10.210.2.2:4223"' in conf and 'listen: "10.210.2.2:7223"' in conf
    assert conf.count('name: "s2"') == 2  # cluster and gateway names agree (NATS requires it)
    assert conf.count("nats-route://") == 1 and "nats-route://10.210.2.2:6222" in conf
    assert '{name: "s1", urls: ["nats://10.210.1.2:7222", "nats://10.210.1.2:7223"]}' in conf
    assert '{name: "s3"' in conf and '{name: "s2"' not in conf
    assert expected(me, nodes, "gateways") == (1, ["s1", "s3"])
    with pytest.raises(ServiceError, match="topology"):
        render_config(me, nodes, "mesh")


def test_formed_reads_routez_and_gatewayz() -> None:
    def rz(*ids: str) -> dict[str, object]:
        return {"num_routes": len(ids), "routes": [{"remote_id": i} for i in ids]}

    gz: dict[str, Any] = {"outbound_gateways": {"s2": {"connection": {"cid": 4}},
                                                "s3": {"configured": True}}}
    assert formed(rz("B", "C"), None, {"B", "C"}, [])
    assert not formed(rz("B"), None, {"B", "C"}, [])
    assert not formed(rz("B", "B"), None, {"B", "C"}, [])  # a transient duplicate route
    assert not formed(rz("B", "B", "C"), None, {"B", "C"}, [])
    assert not formed(rz("B"), gz, {"B"}, ["s2", "s3"])
    gz["outbound_gateways"]["s3"]["connection"] = {"cid": 5}
    assert formed(rz("B"), gz, {"B"}, ["s2", "s3"])
    assert formed(rz(), gz, set(), ["s2", "s3"])
    # Connections younger than settle_s do not count yet (server clock: `now` - `start`).
    young = {"now": "2026-11-22T17:13:47.376628568Z", "num_routes": 1,
             "routes": [{"remote_id": "B", "start": "2026-11-22T17:13:47.32315258Z"}]}
    assert formed(young, None, {"B"}, []) and not formed(young, None, {"B"}, [], settle_s=1.0)
    young["now"] = "2026-11-22T17:13:48.5Z"
    assert formed(young, None, {"B"}, [], settle_s=1.0)
    assert not formed(rz("B"), None, {"B"}, [], settle_s=1.0)  # no timestamps: not settled


class _FakeSites:
    sites = range(1, 4)

    def site_ip(self, site: int) -> str:
        return IPS[site]


def test_rejects_bad_options() -> None:
    with pytest.raises(ServiceError, match="sites: 5"):
        Nats(_FakeSites(), sites=[5])  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="topology"):
        Nats(_FakeSites(), sites=[1], topology="mesh")  # type: ignore[arg-type]


# ---- a tiny NATS client (text protocol over a plain socket) ----------------------------------

class Client:
    """CONNECT/SUB/PUB/PING over one socket opened inside a site (the socket keeps its netns)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.msgs = 0
        info = self._line()
        assert info.startswith(b"INFO "), info
        self.info = json.loads(info[5:])
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"name":"juice-test"}\r\n')

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("nats closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n: int) -> None:
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("nats closed the connection")
            self.buf += chunk
        self.buf = self.buf[n + 2:]

    def flush(self) -> None:
        """PING and read until PONG, counting the MSGs that arrive meanwhile."""
        self.sock.sendall(b"PING\r\n")
        for _ in range(100_000):  # bounded
            line = self._line()
            if line == b"PONG":
                return
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                self.msgs += 1
                self._take(int(line.split()[-1]))
            elif line.startswith(b"-ERR"):
                raise ConnectionError(line.decode())
        raise AssertionError("no PONG")

    def sub(self, subject: str, queue: str, sid: int = 1) -> None:
        self.sock.sendall(f"SUB {subject} {queue} {sid}\r\n".encode())
        self.flush()

    def pub(self, subject: str, payload: bytes) -> None:
        self.sock.sendall(f"PUB {subject} {len(payload)}\r\n".encode() + payload + b"\r\n")


def connect(lab: LocalLab, site: int, url: str) -> Client:
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    sock = from_site(lab, site, lambda: socket.create_connection((host, int(port)), timeout=5))
    return Client(sock)


def locality(lab: LocalLab, nats: Nats, n: int = 200, sites: tuple[int, ...] = (1, 2, 3)
             ) -> dict[int, float]:
    """Queue subscribers (one per site of ``sites``, each on its own site's server), a
    publisher in site 1 sending ``n`` messages: the share each subscriber received."""
    subs = {s: connect(lab, s, nats.url(s)) for s in sites}
    pub = connect(lab, 1, nats.url(1))
    try:
        for s, c in subs.items():
            c.sub("juice.loc", "workers", sid=s)
        # Interest crosses routes/gateways (10 ms one way): a few round trips suffice.
        time.sleep(0.5)
        pub.flush()
        for i in range(n):
            pub.pub("juice.loc", f"m{i}".encode())
        pub.flush()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.2)
            for c in subs.values():
                c.flush()
            if sum(c.msgs for c in subs.values()) >= n:
                break
        got = {s: c.msgs for s, c in subs.items()}
        assert sum(got.values()) == n, got  # a queue group delivers each message once
        return {s: k / n for s, k in got.items()}
    finally:
        for c in [*subs.values(), pub]:
            c.sock.close()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _deploy_and_check(lab: LocalLab, topology: str, servers_per_site: int) -> tuple[Nats, list[int]]:
    nats = Nats(lab, print, sites=[1, 2, 3], topology=topology,  # type: ignore[arg-type]
                servers_per_site=servers_per_site)
    nats.up(timeout=40)
    recs = nats.records()
    pids = [r.pid for r in recs]
    assert len(pids) == 3 * servers_per_site and all(proc.alive(p) for p in pids)
    assert all(Path(f"/proc/{p}/comm").read_text().strip() == "nats-server" for p in pids)
    assert nats.url(2) == f"nats://{lab.site_ip(2)}:4222"
    counters = nats.counters()
    assert len(counters) == len(pids)
    print(f"\n{topology}: timings {nats.timings}, RSS MB "
          f"{[round(_rss_mb(p), 1) for p in pids]}, load {Path('/proc/loadavg').read_text().split()[:3]}")
    return nats, pids


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_cluster_picks_queue_members_at_random(lab3: LocalLab) -> None:
    nats, pids = _deploy_and_check(lab3, "cluster", 1)
    try:
        assert all(c["routes"] == 2 and c["gateways_out"] == [] for c in nats.counters())
        shares = locality(lab3, nats)
        print(f"cluster: queue shares per site {shares}")
        assert shares[1] < 0.8  # VERIFIED-FACTS: ~35 % local with 3 sites
        assert nats.facts()["version"] == version() != "unknown"
    finally:
        nats.stop()
    assert not any(proc.alive(p) for p in pids) and nats.records() == []


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_gateways_keep_queue_traffic_local_and_reform(lab3: LocalLab) -> None:
    nats, pids = _deploy_and_check(lab3, "gateways", 2)
    try:
        for c in nats.counters():
            others = sorted(f"s{s}" for s in (1, 2, 3) if s != c["site"])
            assert c["routes"] == 1 and c["gateways_out"] == others, c
        shares = locality(lab3, nats)
        print(f"gateways: queue shares per site {shares}")
        assert shares[1] == 1.0
        # Without a subscriber in site 1 the messages do cross the gateways (the remote
        # interest was known: 100 % local above is a preference, not ignorance).
        remote = locality(lab3, nats, n=50, sites=(2, 3))
        print(f"gateways, no subscriber in site 1: shares {remote}")
        assert abs(sum(remote.values()) - 1.0) < 1e-9  # every message delivered once
        # A crash of site 2's servers, a restart, and the super-cluster forms again.
        killed = nats.kill(2)["pids"]
        assert len(killed) == 2 and not any(proc.alive(p) for p in killed)
        with pytest.raises(ServiceError, match="nothing killed"):
            nats.restart(3)
        info = nats.restart(2, timeout=30)
        print(f"gateways: site 2 restarted, formed again in {info['formed_s']} s")
        assert all(c["routes"] == 1 and len(c["gateways_out"]) == 2 for c in nats.counters())
        pids = [r.pid for r in nats.records()]
        assert len(pids) == 6 and all(proc.alive(p) for p in pids)
    finally:
        nats.stop()
    assert not any(proc.alive(p) for p in pids) and nats.records() == []
