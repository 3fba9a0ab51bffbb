"""Juice's NATS transport for oslo.messaging (``juice_messaging.nats_driver``, not upstream's)
against real nats-servers in a 3-site lab (10 ms one way): one RPC server per site (threading
executor) and a client in site 1, each a process of the messaging venv inside its site.

- gateways (a super-cluster): call, remote exceptions, a call nobody serves, casts, fanout and a
  server-directed cast; every topic call is served in the client's own site.
- cluster: the queue group spreads the calls over the sites; then site 1's server is killed and
  the client (URL listing sites 1 and 2) is served again after its reconnect."""

from __future__ import annotations

import json
import queue
import statistics
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from juice.lab import LocalLab
from juice.paths import cache_dir
from juice.services.buses.nats import Nats
from tests.services.conftest import needs_lab

MESSAGING = cache_dir() / "messaging"
PY = MESSAGING / "bin" / "python"
no_venv = pytest.mark.skipif(not PY.exists(),
                             reason=f"{PY} missing: run scripts/setup.sh (the messaging venv)")
TOPIC = "juice-nats"

_PRELUDE = r"""
import json, os, sys, threading, time, warnings
warnings.simplefilter("ignore")
import oslo_messaging as om
from oslo_config import cfg

conf = cfg.CONF  # 18.3.1 registers its tracing options on cfg.CONF only
conf([], project="juice-nats", default_config_files=[], default_config_dirs=[])


def wait_file(path, bound):
    deadline = time.monotonic() + bound
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
"""

# argv: URL SITE RELEASE_FILE. Prints READY once subscribed, then serves until RELEASE_FILE.
SERVER = _PRELUDE + r"""
url, site, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
transport = om.get_rpc_transport(conf, url=url)
seen, lock = [], threading.Lock()


class Custom(Exception):
    pass


class Endpoint:
    def where(self, ctxt):
        return site

    def note(self, ctxt, tag):
        with lock:
            seen.append(tag)

    def seen(self, ctxt):
        with lock:
            return list(seen)

    def boom(self, ctxt, text):
        raise ValueError(text)

    def custom(self, ctxt, text):
        raise Custom(text)


server = om.get_rpc_server(transport, om.Target(topic="juice-nats", server=f"s{site}"), [Endpoint()],
                           executor="threading")
server.start()
print("READY", flush=True)
wait_file(release, 150)
server.stop()
server.wait()
print(json.dumps(transport._driver.stats()), flush=True)
transport.cleanup()
"""

# argv: URL SITES(1,2,3) KILLED_FILE ("-": no phase 2). Prints phase 1's JSON; with a KILLED_FILE,
# waits for it, then calls until served again (bounded) and prints phase 2's JSON.
CLIENT = _PRELUDE + r"""
url, sites, killed = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
transport = om.get_rpc_transport(conf, url=url)
client = om.get_rpc_client(transport, om.Target(topic="juice-nats"), timeout=5)
res = {}


def direct(site, timeout=2):
    return client.prepare(server=f"s{site}", timeout=timeout)


# Warm-up: each server answers a server-directed call (its topic subscription was made before, on
# the same connection, so the interest in its queue group has crossed the routes/gateways too).
for s in sites:
    deadline = time.monotonic() + 20
    while True:
        try:
            assert direct(s).call({}, "where") == s
            break
        except om.MessagingTimeout:
            if time.monotonic() > deadline:
                raise
where, rtt = [], []
for i in range(60):
    t = time.monotonic()
    where.append(client.call({}, "where"))
    rtt.append(time.monotonic() - t)
res["where"], res["rtt_s"] = where, rtt
for method in ("boom", "custom"):
    try:
        client.call({}, method, text=f"{method}: it broke")
        res[method] = None
    except Exception as e:
        res[method] = {"class": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
                       "str": str(e), "exc_type": getattr(e, "exc_type", None),
                       "value": getattr(e, "value", None)}
t = time.monotonic()
try:
    client.prepare(topic="juice-nobody", timeout=1).call({}, "where")
    res["nobody"] = {"class": None}
except Exception as e:
    res["nobody"] = {"class": type(e).__name__, "s": time.monotonic() - t}
casts = [f"c{i}" for i in range(6)]
for tag in casts:
    client.cast({}, "note", tag=tag)
client.prepare(fanout=True).cast({}, "note", tag="fan")
direct(sites[-1]).cast({}, "note", tag="direct")


def collect():
    return {s: direct(s).call({}, "seen") for s in sites}


deadline = time.monotonic() + 10  # casts are asynchronous: wait (bounded) until all arrived
while True:
    seen = collect()
    got = [t for tags in seen.values() for t in tags]
    if (all(t in got for t in casts) and all("fan" in v for v in seen.values())
            and "direct" in got) or time.monotonic() > deadline:
        break
    time.sleep(0.1)
res["casts"], res["seen"] = casts, seen
print(json.dumps(res), flush=True)
if killed != "-":
    wait_file(killed, 60)
    t, attempts, first = time.monotonic(), 0, None
    while time.monotonic() - t < 40:
        attempts += 1
        try:
            client.prepare(timeout=2).call({}, "where")
            first = time.monotonic() - t
            break
        except (om.MessagingTimeout, om.MessageDeliveryFailure):
            pass
    after = [client.call({}, "where") for _ in range(10)] if first is not None else []
    print(json.dumps({"first_s": first, "attempts": attempts, "after": after,
                      "stats": transport._driver.stats()}), flush=True)
transport.cleanup()
"""


def _reader(stream: IO[bytes], out: queue.Queue[bytes]) -> None:
    for line in stream:
        out.put(line)
    out.put(b"")  # EOF


class Proc:
    """A messaging-venv script inside a site, its stdout read line by line (bounded waits)."""

    def __init__(self, lab: LocalLab, site: int, script: str, args: list[str], log: Path) -> None:
        self.log = log
        self.ended = False
        self.err = log.open("wb")
        self.p = lab.popen(site, [str(PY), "-c", script, *args], stdout=subprocess.PIPE, stderr=self.err)
        assert self.p.stdout is not None
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=_reader, args=(self.p.stdout, self.lines), daemon=True).start()

    def line(self, timeout: float) -> str:
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            got = b""
        if not got:
            pytest.fail(f"no output from {self.log.name} ({timeout} s bound): "
                        + self.log.read_text(errors="replace")[-3000:])
        return got.decode().strip()

    def json(self, timeout: float) -> Any:
        return json.loads(self.line(timeout))

    def end(self) -> None:
        self.ended = True
        if self.p.poll() is None:
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        self.err.close()


def _multi(nats: Nats, *sites: int) -> str:
    """One URL listing the client ports of ``sites``' servers (nats://h1:p1,h2:p2/)."""
    return "nats://" + ",".join(nats.url(s).removeprefix("nats://") for s in sites) + "/"


def _servers(lab: LocalLab, nats: Nats, tmp: Path, urls: dict[int, str]) -> dict[int, Proc]:
    procs = {s: Proc(lab, s, SERVER, [u, str(s), str(tmp / "release")], tmp / f"server{s}.err")
             for s, u in urls.items()}
    for p in procs.values():
        assert p.line(60) == "READY"
    return procs


def _stop(procs: list[Proc], tmp: Path) -> list[dict[str, Any]]:
    """Release the servers; each prints its driver's counters on the way out."""
    (tmp / "release").touch()
    stats = []
    for p in procs:
        try:
            if not p.ended and p.log.name.startswith("server"):
                stats.append(json.loads(p.lines.get(timeout=20)))
        except (queue.Empty, ValueError):
            pass
        finally:
            p.end()
    return stats


def _check_phase1(res: dict[str, Any], sites: list[int]) -> None:
    assert len(res["where"]) == 60 and set(res["where"]) <= set(sites)
    # A builtin exception comes back as itself (message + remote traceback), an unknown one as
    # oslo_messaging.RemoteError: what the rabbit driver gives (common.deserialize_remote_exception).
    assert res["boom"]["class"] == "ValueError" and "boom: it broke" in res["boom"]["str"]
    assert res["custom"]["class"] == "RemoteError" and "MessagingException" in res["custom"]["mro"]
    assert res["custom"]["exc_type"] == "Custom" and res["custom"]["value"] == "custom: it broke"
    assert res["nobody"]["class"] == "MessagingTimeout" and res["nobody"]["s"] < 1 + 5
    seen = {int(k): v for k, v in res["seen"].items()}
    got = sorted(t for tags in seen.values() for t in tags if t.startswith("c"))
    assert got == sorted(res["casts"]), seen  # each cast served exactly once
    assert all(v.count("fan") == 1 for v in seen.values()), seen  # fanout: every server once
    assert [s for s, v in seen.items() if "direct" in v] == [sites[-1]], seen
    assert sum(v.count("direct") for v in seen.values()) == 1


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
@no_venv
def test_nats_driver_rpc_over_gateways_stays_local(lab3: LocalLab, tmp_path: Path) -> None:
    nats = Nats(lab3, print, sites=[1, 2, 3], topology="gateways")
    procs: list[Proc] = []
    try:
        nats.up(timeout=40)
        procs += _servers(lab3, nats, tmp_path, {s: nats.url(s) for s in (1, 2, 3)}).values()
        client = Proc(lab3, 1, CLIENT, [nats.url(1), "1,2,3", "-"], tmp_path / "client.err")
        procs.append(client)
        res = client.json(90)
        _check_phase1(res, [1, 2, 3])
        assert res["where"] == [1] * 60  # gateways: the local cluster is strictly preferred
        assert all(tag in res["seen"]["1"] for tag in res["casts"])
        med = statistics.median(res["rtt_s"]) * 1000
        print(f"\nnats driver, gateways: 60/60 calls served in site 1, median call {med:.2f} ms, "
              f"timeout after {res['nobody']['s']:.2f} s")
        stats = _stop(procs, tmp_path)
        assert len(stats) == 3 and all(s["nats"]["reconnects"] == 0 for s in stats), stats
        print(f"servers' NATS msgs in: {[s['nats']['msgs_in'] for s in stats]}")
    finally:
        _stop(procs, tmp_path)
        nats.stop()


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
@no_venv
def test_nats_driver_cluster_spreads_and_reconnects(lab3: LocalLab, tmp_path: Path) -> None:
    nats = Nats(lab3, print, sites=[1, 2, 3], topology="cluster")
    procs: list[Proc] = []
    try:
        nats.up(timeout=40)
        urls = {1: _multi(nats, 1, 2), 2: nats.url(2), 3: nats.url(3)}
        procs += _servers(lab3, nats, tmp_path, urls).values()
        killed = tmp_path / "killed"
        client = Proc(lab3, 1, CLIENT, [_multi(nats, 1, 2), "1,2,3", str(killed)], tmp_path / "client.err")
        procs.append(client)
        res = client.json(90)
        _check_phase1(res, [1, 2, 3])
        spread = {s: res["where"].count(s) for s in (1, 2, 3)}
        assert len([s for s, n in spread.items() if n]) >= 2, spread  # random member of the group
        print(f"\nnats driver, cluster: calls per site {spread}, "
              f"median call {statistics.median(res['rtt_s']) * 1000:.2f} ms")
        nats.kill(1)  # the client's (and site 1 server's) nats-server
        killed.touch()
        again = client.json(60)
        assert again["first_s"] is not None, again
        assert len(again["after"]) == 10 and set(again["after"]) <= {1, 2, 3}
        st = again["stats"]["nats"]
        assert st["reconnects"] >= 1 and st["server"] == nats.url(2).removeprefix("nats://"), st
        print(f"reconnect: served again {again['first_s']:.2f} s after the kill "
              f"({again['attempts']} attempt(s)), client now on {st['server']}")
        stats = _stop(procs, tmp_path)  # servers 1, 2, 3: site 1's moved to site 2's nats too
        assert len(stats) == 3 and stats[0]["nats"]["reconnects"] >= 1, stats
        assert stats[1]["nats"]["reconnects"] == stats[2]["nats"]["reconnects"] == 0, stats
    finally:
        _stop(procs, tmp_path)
        nats.stop()
