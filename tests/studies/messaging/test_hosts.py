"""The messaging study on SSH hosts (tests/remote/sshhosts.py: an sshd per site namespace, each
host with a private /var/tmp/juice-host): `juice run` of a spec with `provider:` gives the same
result files as the same spec run locally, and leaves nothing on the hosts. A bad provider is
one line, exit 2, before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from juice.paths import cache_dir
from tests.conftest import said_lines
from tests.remote.sshhosts import SSHD, plain_ssh, ssh_hosts
from tests.services.conftest import needs_lab

JUICE = str(Path(sys.executable).parent / "juice")
PY = cache_dir() / "messaging" / "bin" / "python"

SPEC: dict[str, Any] = {
    "workload": "messaging",
    "name": "msg-hosts",
    "sites": 3,
    "delay_ms": 2,
    "buses": [{"kind": "rabbitmq", "nodes": 1, "name": "central"}],
    # calls from sites 2 and 3 to servers in sites 1 and 3: agents on three hosts
    "cases": [{"tc": "tc1", "clients": 2, "servers": 2, "clients_in": [2, 3], "servers_in": [1, 3],
               "rate": 150, "duration_s": 2}],
    "arrivals": "uniform",  # the same number of messages on both
    "warmup_s": 0.5,
}


def _juice(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    cp = subprocess.run([JUICE, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                        env={**os.environ, **(env or {})})
    return cp.returncode, cp.stdout + cp.stderr


def _run_dir(results: Path) -> Path:
    runs = [d for d in results.iterdir() if d.is_dir() and (d / "manifest.json").exists()]
    assert len(runs) == 1, runs
    return runs[0]


def _files(run: Path) -> set[str]:
    """The run's files, but the bus's logs (named per node); the resource profile included
    (sampled on the hosts as in a local lab)."""
    return {str(f.relative_to(run)) for f in run.rglob("*")
            if f.is_file() and "bus-logs" not in f.parts}


@pytest.mark.skipif(not SSHD.exists(), reason="no sshd (scripts/setup.sh installs it)")
@pytest.mark.skipif(not PY.exists(), reason=f"{PY} missing: run scripts/setup.sh")
@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_messaging_on_ssh_hosts_gives_the_results_of_a_local_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with ssh_hosts(3, tmp_path / "hosts") as (_lab, hosts):
        static = {"hosts": [{"address": h.address, "port": h.port, "user": h.user, "key_file": h.key_file,
                             "wan_address": h.wan_address} for h in hosts]}
        spec = tmp_path / "ssh.yaml"
        spec.write_text(yaml.safe_dump({**SPEC, "provider": {"kind": "enoslib", "static": static}}))
        # no messaging venv at the places: one line naming the host and the fix, before any bus
        code, out = _juice("run", str(spec), "--results", str(tmp_path / "novenv"), "--no-report",
                           env={"JUICE_MESSAGING_VENV": str(tmp_path / "no-venv")})
        last = out.strip().splitlines()[-1]
        assert code == 2 and "site 1 (root@127.0.0.1:" in last and "juice hosts prepare" in last, out
        assert "rabbitmq" not in out.split("lab msg")[-1], out
        code, out = _juice("run", str(spec), "--results", str(results / "ssh"), "--no-report")
        assert code == 0, out
        for h in hosts:  # nothing left: files, rules
            left = plain_ssh(h, tmp_path / "hosts",
                             "ls -A /var/tmp/juice-host; iptables -t mangle -S | grep -c JUICE || true")
            assert left.split() == ["0"], left
    ssh = _run_dir(results / "ssh")
    man = json.loads((ssh / "manifest.json").read_text())
    assert man["lab"]["provider"] == "enoslib-static" and len(man["lab"]["hosts"]) == 3, man["lab"]
    procs = json.loads((ssh / "processes.json").read_text())
    assert sorted(p["site"] for p in procs) == [1, 2, 3, 3]
    assert all(p["rss_kib"] > 0 and p["cpu_s"] is not None for p in procs), procs
    # no agent process left (by the pids they reported; the test hosts share this pid space)
    assert not [p["pid"] for p in procs if Path(f"/proc/{p['pid']}").exists()]

    local_spec = tmp_path / "local.yaml"
    local_spec.write_text(yaml.safe_dump(SPEC))
    code, out = _juice("run", str(local_spec), "--results", str(results / "local"), "--no-report")
    assert code == 0, out
    local = _run_dir(results / "local")
    assert json.loads((local / "manifest.json").read_text())["lab"]["provider"] == "local"

    # the same files, tables with the same columns, the same counts (every call answered)
    assert _files(ssh) == _files(local), (_files(ssh), _files(local))
    # the same point (its key: the point's parameters), measured on hosts and locally
    assert man["run_key"] == json.loads((local / "manifest.json").read_text())["run_key"]
    for table in ("messages.parquet", "deliveries.parquet"):
        assert list(pd.read_parquet(ssh / table).columns) == list(pd.read_parquet(local / table).columns)
    s_ssh, s_loc = (json.loads((d / "summary.json").read_text()) for d in (ssh, local))
    assert set(s_ssh) == set(s_loc)
    assert s_ssh["sent"] == s_loc["sent"] > 0
    for s in (s_ssh, s_loc):
        assert s["ok"] == s["delivered"] == s["expected_deliveries"] == s["sent"], s
        assert s["lost"] == 0 and s["duplicates"] == 0, s


def test_too_few_hosts_is_one_line_exit_2(tmp_path: Path) -> None:
    hosts = [{"address": "192.0.2.1"}, {"address": "192.0.2.2"}]
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "provider": {"kind": "enoslib", "static": {"hosts": hosts}}}))
    code, out = _juice("run", str(spec), "--results", str(tmp_path / "results"))
    assert code == 2, out
    lines = said_lines(out)
    assert len(lines) == 1 and "provider.static.hosts" in lines[0] and "3 sites" in lines[0], out
