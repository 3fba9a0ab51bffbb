"""The resource sampler on a real 2-site lab: it finds the processes of the sites by their
network namespace, names them from the records or their command lines, measures a busy one's
CPU, sees the bytes the sites exchanged on their links, writes profile.parquet, and leaves
no process, thread or open file behind."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from juice.lab import LocalLab, netns
from juice.lab import spec as labspec
from juice.profile import sampler
from juice.profile.frames import load_profile, per_component, utilisation
from juice.services.base import ServerRecord
from juice.util import proc
from tests.conftest import lab_capable

pytestmark = [pytest.mark.root, pytest.mark.skipif(lab_capable() is not None, reason=str(lab_capable()))]

SERVER = "import socket,sys\ns=socket.create_server((sys.argv[1],9000))\nwhile True:\n" \
         " c,_=s.accept()\n while c.recv(65536): pass\n c.close()\n"
CLIENT = "import socket,sys,time\nfor _ in range(40):\n c=socket.create_connection((sys.argv[1],9000))\n" \
         " c.sendall(b'x'*100000); c.close(); time.sleep(0.05)\n"


def lab_pids(lab: LocalLab) -> set[int]:
    return {p for ns in lab.topo.namespaces() for p in netns.pids(ns)}


def test_sampler_profiles_lab_processes_and_links(lab_name: str, tmp_path: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    with LocalLab.up(labspec.parse({"name": lab_name, "sites": 2, "delay_ms": 1}), ephemeral=True) as lab:
        backend = lab.state.backend
        busy = lab.popen(1, ["python3", "-c", "while True: pass"])
        server = lab.popen(2, ["python3", "-c", SERVER, lab.site_ip(2)])
        short = lab.popen(1, ["sleep", "1.5"])
        try:
            time.sleep(0.5)
            before = lab_pids(lab)
            rec = ServerRecord(kind="sink", site=2, pid=server.pid, pid_start=proc.start_time(server.pid),
                               datadir="", log="", port=9000)
            prof = sampler.start(lab, lambda: [_Svc([rec])], tmp_path, sampler.Settings(interval_s=0.25),
                                 print)
            assert prof is not None
            assert lab_pids(lab) == before  # the sampler starts no process (no holder)
            client = lab.popen(1, ["python3", "-c", CLIENT, lab.site_ip(2)])
            assert client.wait(timeout=60) == 0
            time.sleep(0.6)
            summary = prof.stop()
            assert not any(t.name == "juice-profile" for t in threading.enumerate())
            assert lab_pids(lab) - {client.pid} <= before  # nothing of the sampler's left
        finally:
            for p in (busy, server, short):
                p.kill()
                p.wait()
    assert len(os.listdir("/proc/self/fd")) == fds_before  # every /proc file closed

    assert summary["errors"] == 0, summary["error_samples"]
    assert summary["table"] == "profile.parquet" and summary["ticks"] >= 8
    assert summary["network"] and summary["sites"] == 2 and summary["tick_cpu_s"] > 0
    df = pq.read_table(tmp_path / sampler.PROFILE_TABLE).to_pandas()
    df[["component", "metric"]] = df[["component", "metric"]].astype(str)
    pids = set(df["pid"].unique())
    assert {busy.pid, server.pid, short.pid, client.pid} <= pids
    named = df.groupby("pid")["component"].first().astype(str)
    assert named[server.pid] == "sink"  # from its ServerRecord
    assert named[busy.pid] == "python" and named[short.pid] == "sleep"
    if backend == "userspace":  # the WAN delayer lives in the core namespace (site 0)
        assert set(df.loc[df.component == "wan-delay", "site"]) == {0}
    # the busy loop's CPU grows; the short-lived sleep stops being sampled when it exits
    cpu = df[(df.pid == busy.pid) & (df.metric == "cpu_user_s")].sort_values("time")["value"]
    assert cpu.iloc[-1] - cpu.iloc[0] > 0.5
    assert df.loc[df.pid == short.pid, "time"].max() < df["time"].max()
    # site 1 sent ~4 MB to site 2: its out counter and site 2's in counter grew by that much
    link = df[df.component == "link"]
    for site, metric in ((1, "net_out_bytes"), (2, "net_in_bytes")):
        s = link[(link.site == site) & (link.metric == metric)].sort_values("time")["value"]
        assert s.is_monotonic_increasing and s.iloc[-1] - s.iloc[0] > 3_500_000, (site, metric)
    # utilisation: the busy loop is close to one core at some tick
    u = per_component(utilisation(df), by_site=True)
    peak = u[(u.component == "python") & (u.metric == "cpu_pct")]["value"].max()
    assert peak > 40


class _Svc:
    def __init__(self, recs: list[ServerRecord]) -> None:
        self.recs = recs

    def records(self) -> list[ServerRecord]:
        return self.recs


def test_interrupted_sampler_writes_nothing(lab_name: str, tmp_path: Path) -> None:
    with LocalLab.up(labspec.parse({"name": lab_name, "sites": 1}), ephemeral=True) as lab:
        prof = sampler.start(lab, list, tmp_path, sampler.Settings(interval_s=0.1), print)
        assert prof is not None
        time.sleep(0.3)
        summary = prof.stop(keep=False)
    assert summary["table"] is None and not list(tmp_path.iterdir())


def test_no_lab_no_sampler(tmp_path: Path) -> None:
    assert sampler.start(None, list, tmp_path, sampler.Settings(), print) is None
    assert sampler.start(None, list, tmp_path, sampler.Settings(enabled=False), print) is None
    assert load_profile([tmp_path]).empty
