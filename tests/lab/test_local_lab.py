"""Integration tests: real namespaces, veths, iptables and the real WAN delayer.

Delays are small (a few ms) to keep the suite fast; accuracy at 50/150 ms is measured by
benchmarks/lab_accuracy.py, not asserted here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from juice.lab import LocalLab, netns, spec, state
from juice.lab.check import check
from tests.conftest import lab_capable

pytestmark = [pytest.mark.root, pytest.mark.skipif(lab_capable() is not None,
                                                    reason=lab_capable() or "")]


def juice(*args: str, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "juice.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def lab_namespaces(name: str) -> list[str]:
    return [ns for ns in netns.list_all() if ns.startswith(f"juice-{name}-")]


def ping(lab: LocalLab, src: int, dst: int, count: int = 2) -> bool:
    cp = lab.run(src, ["ping", "-n", "-q", "-c", str(count), "-i", "0.05", "-W", "1",
                       lab.site_ip(dst)], check=False, timeout=30)
    return cp.returncode == 0


def test_uniform_lab_passes_its_check_and_leaves_nothing(lab_name: str) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 3, "delay_ms": 5}),
                     ephemeral=True) as lab:
        assert lab_namespaces(lab_name) == sorted(lab.topo.namespaces())
        assert lab.health()["healthy"]
        rep = check(lab, probes=15, tol_ms=1.0)  # 1 ms: see the zones test below
        assert len(rep.pairs) == 3
        assert all(p.expected_rtt_ms == 10 and p.received == 15 for p in rep.pairs)
        assert rep.ok, rep.to_dict()
        daemon = lab.state.daemon_pid
        wd = lab.workdir
        assert wd.is_dir()
    assert lab_namespaces(lab_name) == []
    assert not Path(f"/proc/{daemon}").exists()
    assert not wd.exists()
    assert state.load(lab_name) is None


def test_services_listen_on_the_site_address_and_tcp_buffers_are_raised(lab_name: str) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2, "delay_ms": 1}),
                     ephemeral=True) as lab:
        srv = lab.popen(2, ["socat", f"TCP-LISTEN:7000,bind={lab.site_ip(2)},reuseaddr", "EXEC:cat"])
        try:
            out = ""
            for _ in range(50):  # bounded: the listener needs a moment
                cp = lab.run(1, ["socat", "-T", "2", "-", f"TCP:{lab.site_ip(2)}:7000"],
                             check=False, timeout=10)
                out = cp.stdout
                if cp.returncode == 0:
                    break
                time.sleep(0.05)
            assert out == ""  # socat with empty stdin: connected, echoed nothing, closed
            rmem = lab.run(1, ["sysctl", "-n", "net.ipv4.tcp_rmem"]).stdout.split()
            assert int(rmem[2]) >= 64 * 1024 * 1024
        finally:
            srv.kill()
            srv.wait()


def test_zones_partition_heal_and_runtime_reload(lab_name: str) -> None:
    s = spec.parse({"name": lab_name, "sites": 4, "zones": {"A": [1, 2], "B": [3, 4]},
                    "intra_zone_delay_ms": 0, "inter_zone_delay_ms": 4})
    with LocalLab.up(s, ephemeral=True) as lab:
        # 1 ms of tolerance (0.5 by default): the suite's other workers load the cores the
        # userspace delayer runs on; 0, 2 and 4 ms are still told apart
        rep = check(lab, probes=20, tol_ms=1.0)
        assert rep.ok, rep.to_dict()
        assert {(p.a, p.b): p.expected_rtt_ms for p in rep.pairs}[(1, 2)] == 0
        lab.partition(3)
        assert not ping(lab, 1, 3) and not ping(lab, 3, 4)
        assert ping(lab, 1, 4)
        cut = check(lab, probes=3, tol_ms=1.0)
        assert cut.ok and {(p.a, p.b) for p in cut.pairs if p.partitioned} == {(1, 3), (2, 3), (3, 4)}
        lab.heal(3)
        assert ping(lab, 1, 3)
        # Reload while traffic flows: not one packet may be lost.
        flow = lab.popen(1, ["ping", "-n", "-q", "-c", "150", "-i", "0.01", "-W", "2",
                             lab.site_ip(4)], stdout=subprocess.PIPE)
        time.sleep(0.5)
        lab.set_wan(spec.parse({"sites": 4, "delay_ms": 2}))
        out, _ = flow.communicate(timeout=60)
        assert b"150 received" in out, out
        rep2 = check(lab, probes=20, tol_ms=1.0)  # see above
        assert rep2.ok and {p.expected_rtt_ms for p in rep2.pairs} == {4}
        assert state.load(lab_name) is not None and state.load(lab_name).spec["delay_ms"] == 2  # type: ignore[union-attr]


def test_cli_bad_input_exits_2_naming_the_field(tmp_path: Path, lab_name: str) -> None:
    bad = tmp_path / "lab.yaml"
    bad.write_text("sites: 3\ndelay_ms: 5\nflavour: x\n")
    cp = juice("lab", "up", "--spec", str(bad), "--name", lab_name)
    assert cp.returncode == 2 and "flavour" in cp.stderr and str(bad) in cp.stderr
    cp = juice("lab", "up", "--sites", "3", "--delay", "-4", "--name", lab_name)
    assert cp.returncode == 2 and "delay_ms" in cp.stderr
    bad.write_text("sites: 3\ndelay_ms: 5\npairs: [{a: 1, b: 9, delay_ms: 3}]\n")
    cp = juice("lab", "up", "--spec", str(bad), "--name", lab_name)
    assert cp.returncode == 2 and "pairs.0.b" in cp.stderr and "unknown site 9" in cp.stderr
    assert lab_namespaces(lab_name) == []


def test_cli_up_status_check_down(lab_name: str) -> None:
    try:
        cp = juice("lab", "up", "--sites", "3", "--zones", "3", "--intra", "0", "--inter", "2",
                   "--name", lab_name)
        assert cp.returncode == 0, cp.stderr
        again = juice("lab", "up", "--sites", "3", "--name", lab_name)
        assert again.returncode == 2 and "already up" in again.stderr
        st = juice("lab", "status", "--json", "--name", lab_name)
        assert st.returncode == 0 and json.loads(st.stdout)["sites"] == 3
        # 1 ms of tolerance (0.5 by default): the suite's other workers load the cores the
        # userspace delayer runs on; 4 ms and 0 ms pairs are still told apart
        ck = juice("lab", "check", "--probes", "20", "--tolerance-ms", "1", "--name", lab_name)
        assert ck.returncode == 0, ck.stdout
    finally:
        dn = juice("lab", "down", "--name", lab_name)
    assert dn.returncode == 0
    assert lab_namespaces(lab_name) == []


def _wait_for(pred: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_killed_lab_up_leaves_nothing_after_the_next_command(lab_name: str, sig: int) -> None:
    env = dict(os.environ, JUICE_TEST_SLOW_UP_S="0.3")
    p = subprocess.Popen([sys.executable, "-m", "juice.cli", "lab", "up", "--sites", "6",
                          "--delay", "5", "--name", lab_name], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: len(lab_namespaces(lab_name)) >= 3)
    finally:
        p.send_signal(sig)
        p.wait(timeout=60)
    if sig == signal.SIGKILL:
        assert lab_namespaces(lab_name)  # really crashed half-way
        juice("lab", "status", "--name", "nosuchlab")  # any command sweeps
    else:
        assert p.returncode == 130
    assert lab_namespaces(lab_name) == []
    assert state.load(lab_name) is None
    leftovers = [line for line in subprocess.run(["ps", "-eo", "args"], capture_output=True,
                                                 text=True).stdout.splitlines()
                 if f"/{lab_name}/wan-table" in line]
    assert leftovers == []


def test_ephemeral_lab_of_a_killed_owner_is_swept(lab_name: str) -> None:
    code = ("import time; from juice.lab import LocalLab, spec; "
            f"LocalLab.up(spec.parse({{'name': '{lab_name}', 'sites': 2, 'delay_ms': 1}}), "
            "ephemeral=True); print('up', flush=True); time.sleep(120)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "up"
    finally:
        p.kill()
        p.wait()
    assert lab_namespaces(lab_name)
    juice("lab", "status", "--name", "nosuchlab")
    assert lab_namespaces(lab_name) == []
