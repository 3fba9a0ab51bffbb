"""The code that runs on SSH hosts, run here: the /proc readers (``juice.onhost.procfs``)
against this machine's /proc, the on-host samplers (``juice.onhost.sampler``) on this
machine's processes, and the shipped program (``juice.hosts.bundle``) as a host runs it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from juice.hosts import bundle
from juice.hosts.ssh import boot_command
from juice.onhost import procfs
from juice.onhost import sampler as onhost
from juice.profile import hosts
from juice.profile import ssh as ssh_profile

NAP = f"60.{os.getpid()}"  # a command line no other process on this machine has
NAP_RX = f"napper=^sleep {NAP}$"
SHIPPED = {"juice.onhost.procfs": procfs, "juice.onhost.sampler": onhost}


class Capture(onhost.Channel):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Any] = []

    def out(self, obj: Any) -> None:
        self.sent.append(json.loads(json.dumps(obj)))


@pytest.fixture
def child() -> Any:
    p = subprocess.Popen(["sleep", NAP])
    time.sleep(0.05)
    yield p
    p.kill()
    p.wait()


def test_the_shipped_modules_use_the_standard_library_and_each_other_only() -> None:
    for name, mod in SHIPPED.items():
        tree = ast.parse(Path(mod.__file__ or "").read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for n in names:
                top = n.split(".")[0]
                assert top in sys.stdlib_module_names or n in ("juice.onhost", *SHIPPED), (name, n)


def test_procfs_reads_this_machines_processes(child: subprocess.Popen[bytes]) -> None:
    assert os.getpid() in procfs.pids() and child.pid in procfs.pids()
    st = procfs.read_stat(child.pid)
    assert st is not None and st.pid == child.pid and st.comm == "sleep" and st.ppid == os.getpid()
    assert st.threads == 1 and st.rss_bytes > 0
    assert procfs.read_cmdline(child.pid) == ["sleep", NAP]
    assert procfs.read_cmdline(child.pid, 3) == ["sle"]
    assert procfs.fd_count(os.getpid()) >= 3
    assert (procfs.ns_link(os.getpid(), "mnt") or "").startswith("mnt:[")
    gone = max(procfs.pids()) + 10_000_000
    assert procfs.read_stat(gone) is None and procfs.read_cmdline(gone) == []
    assert procfs.fd_count(gone) == -1 and procfs.ns_link(gone, "mnt") is None


def test_the_pattern_sampler_names_and_samples_matching_processes(child: subprocess.Popen[bytes]) -> None:
    ch = Capture()
    s = onhost.PatternSampler({"patterns": [NAP_RX]}, ch)
    s.sample()
    s.sample()
    assert ch.sent[0] == {"n": [[child.pid, "napper"]]}
    ticks = [m for m in ch.sent if "s" in m]
    assert len(ticks) == 2 and [r[0] for r in ticks[1]["s"]] == [child.pid]
    pid, user, system, rss, threads, fds = ticks[1]["s"][0]
    assert rss > 0 and threads == 1 and fds >= 0 and user >= 0 and system >= 0
    memcached = onhost.patterns(["/usr/bin/memcached"])
    assert onhost.component(memcached, "/usr/bin/memcached -m 64") == "memcached"


def test_the_lab_sampler_takes_the_agent_its_records_and_their_children(
        tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    (tmp_path / "agent.json").write_text(json.dumps({"agent": [os.getppid(), None],
                                                     "procs": [[child.pid, None]]}))
    ch = Capture()
    s = onhost.LabSampler({"root": str(tmp_path), "wan_if": "lo", "max_args": 1}, ch)
    s.sample()
    new = {n[0]: n for n in ch.sent[0]["n"]}
    assert new[child.pid][3:] == ["sleep", ["sleep"], "recorded"]
    assert new[os.getppid()][5] == "agent"
    tick = ch.sent[-1]
    assert child.pid in [r[0] for r in tick["s"]]
    assert len(tick["l"]) == 4 and all(v >= 0 for v in tick["l"])


def _run(script: bytes, ticks_s: float = 0.3) -> list[dict[str, Any]]:
    p = subprocess.Popen(["sh", "-c", boot_command(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         cwd="/")
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(script)  # the boot reads exactly the script; then the conversation
    p.stdin.flush()
    out = [json.loads(p.stdout.readline())]
    p.stdin.write(b"ping\ngo\n")
    p.stdin.flush()
    time.sleep(ticks_s)
    p.stdin.close()
    out += [json.loads(line) for line in p.stdout.read().splitlines()]
    assert p.wait(10) == 0
    return out


def test_the_shipped_pattern_program_runs_as_on_a_host(child: subprocess.Popen[bytes]) -> None:
    out = _run(ssh_profile.remote_script([NAP_RX], 0.1, 60.0))
    assert "ready" in out[0] and "pong" in out[1]
    assert {"n": [[child.pid, "napper"]]} in out
    assert out[-1]["end"] == "stdin closed" and out[-1]["cpu_s"] > 0
    assert sum(1 for m in out if "s" in m) >= 2


def test_the_shipped_lab_program_runs_as_on_a_host(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    (tmp_path / "agent.json").write_text(json.dumps({"agent": [1, None], "procs": [[child.pid, None]]}))
    host = type("H", (), {"root": str(tmp_path), "wan_if": "lo"})()
    out = _run(hosts.remote_script(host, 0.1, 60.0))
    named = [n for m in out if "n" in m for n in m["n"]]
    assert [child.pid, os.getpid(), procfs.read_stat(child.pid).start, "sleep", ["sleep", NAP],  # type: ignore[union-attr]
            "recorded"] in named
    assert any("l" in m for m in out) and out[-1]["end"] == "stdin closed"


def test_a_bundle_loads_modules_under_their_names_in_order() -> None:
    src = bundle.program([("pkg.a", "X = 1\n"), ("pkg.sub.b", "from pkg import a\nY = a.X + 1\n")],
                         "import pkg.sub.b\nprint(pkg.sub.b.Y, sys.modules['pkg.a'].X)")
    out = subprocess.run([sys.executable, "-c", src.decode()], capture_output=True, text=True, check=True)
    assert out.stdout == "2 1\n"
