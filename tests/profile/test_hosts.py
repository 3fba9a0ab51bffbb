"""The lab-on-hosts sampler without a network: its remote program runs for real (python3 here,
reading this host's /proc) through a FAKE ssh (the SampledHost's argv runs the command here).
The "agent" is a sleeping process named in a hand-written agent.json, as the host agent
records what it starts. Real hosts (sshd's) are in tests/lab/test_place.py and
tests/hosts/test_static_provider.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]

from juice.lab.place import SampledHost
from juice.profile import hosts as host_profile
from juice.profile.sampler import Settings, start
from juice.services.base import ServerRecord
from juice.util import proc

SLEEP = "import time, sys; time.sleep(60)"
PARENT = ("import subprocess, sys, time; c = subprocess.Popen(['sleep', '60']); "
          "print(c.pid, flush=True); time.sleep(60)")


class _Lab:
    """The two answers a lab gives the sampler (a lab of hosts)."""

    def __init__(self, hosts: list[SampledHost]) -> None:
        self.hosts = hosts

    def local_namespaces(self) -> None:
        return None

    def sampled_hosts(self) -> list[SampledHost]:
        return self.hosts


class _Svc:
    def __init__(self, recs: list[ServerRecord]) -> None:
        self.recs = recs

    def records(self) -> list[ServerRecord]:
        return self.recs


def _state(root: Path, agent: subprocess.Popen[bytes], procs: list[int]) -> None:
    st = {"agent": [agent.pid, proc.start_time(agent.pid)],
          "procs": [[p, proc.start_time(p)] for p in procs]}
    (root / ".tmp").write_text(json.dumps(st))
    (root / ".tmp").replace(root / "agent.json")


def test_what_the_agent_started_its_children_and_drivers_are_sampled_named_and_timed(tmp_path: Path) -> None:
    root = tmp_path / "juice-host" / "lab1"
    root.mkdir(parents=True)
    py = sys.executable
    started: list[subprocess.Popen[bytes]] = []

    def run(argv: list[str], **kw: object) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(argv, **kw)  # type: ignore[call-overload]
        started.append(p)
        return p

    try:
        agent = run([py, "-c", PARENT], stdout=subprocess.PIPE)  # its child: a command it runs
        server = run([py, "-c", PARENT], stdout=subprocess.PIPE)  # a recorded server + a worker
        driver = run([py, "-c", SLEEP, "-m", "juice.driver"], cwd=root)  # works in the lab's dir
        other = run([py, "-c", SLEEP, "unrelated"])  # not the lab's
        assert agent.stdout is not None and server.stdout is not None
        agent_child, worker = int(agent.stdout.readline()), int(server.stdout.readline())
        _state(root, agent, [server.pid])
        rec = ServerRecord(kind="keystone", site=2, pid=server.pid, pid_start=proc.start_time(server.pid),
                           datadir="", log="", port=5000)
        host = SampledHost(site=2, name="root@fake:22", argv=lambda cmd: ["sh", "-c", cmd], python=py,
                           root=str(root), wan_if="lo")
        prof = start(_Lab([host]), lambda: [_Svc([rec])], tmp_path, Settings(interval_s=0.2),  # type: ignore[arg-type]
                     print)
        assert isinstance(prof, host_profile.HostSampler)
        time.sleep(0.5)
        late = run([py, "-c", SLEEP, "late"])  # recorded later (an adopted daemon)
        _state(root, agent, [server.pid, late.pid])
        time.sleep(1.0)
        summary = prof.stop()
    finally:
        for p in started:
            p.kill()
            p.wait(10)
        for pid in (locals().get("agent_child"), locals().get("worker")):
            if isinstance(pid, int):
                subprocess.run(["kill", str(pid)], check=False)
    assert summary["errors"] == 0, summary["error_samples"]
    (h,) = summary["hosts"]
    assert h["site"] == 2 and h["end"] == "stdin closed" and h["sampler_cpu_s"] > 0
    off = summary["clock_offsets"]["2"]
    assert abs(off["offset_s"]) < 0.05 and 0 < off["rtt_s"] < 1.0  # measured (here: one clock)
    df = pq.read_table(tmp_path / "profile.parquet").to_pandas()
    df[["component", "metric"]] = df[["component", "metric"]].astype(str)
    assert set(df["site"]) == {2}
    named = df.groupby("pid")["component"].first()
    assert named[agent.pid] == "juice-agent" and named[agent_child] == "sleep"
    assert named[server.pid] == "keystone" and named[worker] == "keystone"  # record, recorded parent
    assert named[driver.pid] == "load-driver" and named[late.pid] == "python"
    assert other.pid not in named.index and prof.hosts[0].pid not in named.index
    assert set(df.loc[df.pid == server.pid, "metric"]) == {"cpu_user_s", "cpu_system_s", "rss_bytes",
                                                           "threads", "fds"}
    link = df[df.component == "link"]
    assert set(link["pid"]) == {0} and set(link["metric"]) == {"net_in_bytes", "net_out_bytes",
                                                               "net_in_packets", "net_out_packets"}
    # times on this machine's clock, within the run
    assert time.time() - 5 < df["time"].min() <= df["time"].max() <= time.time()


def test_a_host_that_cannot_be_reached_is_an_error_in_the_summary_not_a_failed_run(tmp_path: Path) -> None:
    refused = ["sh", "-c", "echo refused >&2; exit 255"]
    host = SampledHost(site=1, name="root@nowhere:22", argv=lambda cmd: refused, python="python3",
                       root=str(tmp_path), wan_if=None)
    msgs: list[str] = []
    prof = start(_Lab([host]), list, tmp_path, Settings(interval_s=0.5), msgs.append)  # type: ignore[arg-type]
    assert prof is not None
    summary = prof.stop()
    assert summary["errors"] >= 1 and "refused" in summary["error_samples"][0], summary
    assert summary["clock_offsets"] == {"1": {"offset_s": None, "rtt_s": None}}
    assert any("0/1 host(s)" in m for m in msgs), msgs


def test_the_report_names_each_sites_host_and_its_clock_offset() -> None:
    from juice.report.profiles import notes

    prof = {"source": "hosts", "hz": 1.0, "processes": 9, "errors": 0, "sampler_cpu_pct": 0.5,
            "hosts": [{"site": 1, "host": "root@h1:22", "offset_s": 0.0012, "rtt_s": 0.0004},
                      {"site": 2, "host": "root@h2:22", "offset_s": None, "rtt_s": None}]}
    html = notes({"run-1": {"profile": prof}})
    assert "s1 = root@h1:22, clock offset up to +1.20 ms (RTT 0.40 ms)" in html, html
    assert "s2 = root@h2:22, clock not measured" in html and "0.50 % of one core per host" in html
    assert "SSH hosts" not in notes({"run-1": {"profile": {"hz": 1.0, "tick_cpu_pct": 0.1}}})
