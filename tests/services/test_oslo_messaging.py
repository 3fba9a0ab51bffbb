"""oslo.messaging smoke test against a real RabbitMQ: a one-node broker in site 1; in site 2 a
real oslo.messaging RPC server (threading executor) and client in one process, from the
messaging venv ($JUICE_CACHE/messaging, scripts/setup.sh); then ombt's entry point runs."""

from __future__ import annotations

import json
import queue
import statistics
import subprocess
import threading
from pathlib import Path
from typing import IO

import pytest

from juice.lab import LocalLab, spec
from juice.paths import cache_dir
from juice.services.buses.rabbitmq import RabbitMQ
from tests.services.conftest import needs_lab

MESSAGING = cache_dir() / "messaging"
PY = MESSAGING / "bin" / "python"
no_venv = pytest.mark.skipif(not PY.exists(),
                             reason=f"{PY} missing: run scripts/setup.sh (the messaging venv)")

# argv: URL RELEASE_FILE. Prints one JSON line with the results, then stays connected until
# RELEASE_FILE exists (bounded), so that the broker's counters can be read meanwhile.
SCRIPT = r"""
import json, os, sys, threading, time
import oslo_messaging as om
from oslo_config import cfg

url, release = sys.argv[1], sys.argv[2]
# The global CONF: oslo.messaging 18.3.1 registers its [oslo_messaging_tracing] options on
# cfg.CONF only, so RPC calls on a private ConfigOpts fail with NoSuchOptError.
conf = cfg.CONF
conf([], project="juice-smoke", default_config_files=[], default_config_dirs=[])
transport = om.get_rpc_transport(conf, url=url)
casts = []
got_all = threading.Event()


class Endpoint:
    def echo(self, ctxt, value):
        return value

    def note(self, ctxt, value):
        casts.append(value)
        if len(casts) >= 5:
            got_all.set()


server = om.get_rpc_server(transport, om.Target(topic="juice-smoke", server="s2"),
                           [Endpoint()], executor="threading")
server.start()
client = om.get_rpc_client(transport, om.Target(topic="juice-smoke", server="s2"), timeout=10)
sent, replies, rtts = [], [], []
for i in range(20):
    v = {"i": i, "s": "x" * i}
    t = time.monotonic()
    replies.append(client.call({}, "echo", value=v))
    rtts.append(time.monotonic() - t)
    sent.append(v)
for i in range(5):
    client.cast({}, "note", value=i)
got_all.wait(15)
print(json.dumps({"sent": sent, "replies": replies, "rtt_s": rtts, "casts": sorted(casts)}),
      flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.1)
server.stop()
server.wait()
transport.cleanup()
"""


def _reader(stream: IO[bytes], out: queue.Queue[bytes]) -> None:
    for line in stream:
        out.put(line)
    out.put(b"")  # EOF: the script ended without (more) output


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
@no_venv
def test_oslo_messaging_rpc_real(lab_name: str, tmp_path: Path) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2, "delay_ms": 5}), ephemeral=True) as lab:
        mq = RabbitMQ(lab, nodes=[1])
        try:
            mq.up(timeout=60)
            release = tmp_path / "release"
            err = (tmp_path / "stderr").open("wb")
            p = lab.popen(2, [str(PY), "-c", SCRIPT, mq.url(1), str(release)],
                          stdout=subprocess.PIPE, stderr=err)
            try:
                assert p.stdout is not None
                lines: queue.Queue[bytes] = queue.Queue()
                threading.Thread(target=_reader, args=(p.stdout, lines), daemon=True).start()
                try:
                    line = lines.get(timeout=90)
                except queue.Empty:
                    line = b""
                if not line:
                    pytest.fail("no result from the oslo.messaging script (90 s bound): "
                                + (tmp_path / "stderr").read_text()[-2000:])
                res = json.loads(line)
                counters = mq.counters()["juice1@" + lab.site_ip(1)]
                release.touch()
                assert p.wait(timeout=60) == 0, (tmp_path / "stderr").read_text()[-2000:]
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=10)
                err.close()
            assert len(res["replies"]) == 20 and res["replies"] == res["sent"]
            assert res["casts"] == [0, 1, 2, 3, 4]
            assert counters["connections"] >= 1 and counters["queues"] >= 1
            assert len(res["rtt_s"]) == 20 and statistics.median(res["rtt_s"]) < 5
            # the client in site 2 reaches the broker in site 1 across the 5 ms one-way link: a
            # call is at least one round trip (10 ms; the delayer never releases early), so
            # traffic that bypassed the WAN fails here
            assert min(res["rtt_s"]) >= 0.0098, sorted(res["rtt_s"])[:3]
            print(f"oslo.messaging call rtt median {statistics.median(res['rtt_s']) * 1000:.1f} ms, "
                  f"counters {counters}")
        finally:
            mq.stop()


@no_venv
def test_ombt_entry_point_runs() -> None:
    ombt = MESSAGING / "bin" / "ombt2"
    assert ombt.exists(), sorted(x.name for x in (MESSAGING / "bin").iterdir())
    cp = subprocess.run([str(ombt), "--help"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "usage" in cp.stdout.lower()
