"""The messaging study on SSH hosts (tests/testhosts.py: separate hosts, each its own root
filesystem prepared by ``juice hosts prepare``, processes and clock, in the sites of a lab):
`juice run` of a spec with `provider:` gives the same result files as the same spec run
locally, and leaves nothing on the hosts. The hosts' clocks are seconds apart (OFFSETS): the
one-way times across hosts, raw seconds off, are corrected by the offsets the run measured
(at least the WAN's one-way delay, at most a few ms more, bounds of a fraction of a ms). A bad
provider is one line, exit 2, before anything starts."""

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
from tests import testhosts
from tests.conftest import said_lines
from tests.services.conftest import needs_lab

JUICE = str(Path(sys.executable).parent / "juice")
PY = cache_dir() / "messaging" / "bin" / "python"
OFFSETS = [3.0, -2.0, 1.5]  # each host's clock minus the truth (seconds)

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


@pytest.mark.skipif(testhosts.available() is not None, reason=f"test hosts: {testhosts.available()}")
@pytest.mark.skipif(not PY.exists(), reason=f"{PY} missing: run scripts/setup.sh")
@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_messaging_on_ssh_hosts_gives_the_results_of_a_local_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with testhosts.test_hosts(3, tmp_path / "hosts", OFFSETS, prepared=True) as (_lab, hosts):
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
            left = testhosts.ssh(h, tmp_path / "hosts",
                             "ls -A /var/tmp/juice-host; iptables -t mangle -S | grep -c JUICE || true")
            assert left.split() == ["0"], left
    ssh = _run_dir(results / "ssh")
    man = json.loads((ssh / "manifest.json").read_text())
    assert man["lab"]["provider"] == "enoslib-static" and len(man["lab"]["hosts"]) == 3, man["lab"]
    procs = json.loads((ssh / "processes.json").read_text())
    assert sorted(p["site"] for p in procs) == [1, 2, 3, 3]
    assert all(p["rss_kib"] > 0 and p["cpu_s"] is not None for p in procs), procs
    _check_clocks(ssh, man)

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


def _check_clocks(run: Path, man: dict[str, Any]) -> None:
    """The run measured each host's true offset; its one-way times across hosts are corrected
    with them (raw, they are seconds off), within their bounds, and at least the WAN's delay."""
    offs = man["profile"]["clock_offsets"]
    for k, true in enumerate(OFFSETS, 1):
        assert abs(offs[str(k)]["offset_s"] - true) <= offs[str(k)]["rtt_s"] / 2 + 2e-6, (k, offs)
    m = pd.read_parquet(run / "messages.parquet")
    d = pd.read_parquet(run / "deliveries.parquet")
    m = m[m["ok"] & ~m["warmup"]]
    first = d.groupby("id").agg(t=("t", "min"), srv_site=("site", "first"))
    m = m.join(first, on="id")
    cross = m[m["site"] != m["srv_site"]]
    assert len(cross) > 50, len(cross)
    # raw (each on its own host's clock): off by the two hosts' offsets
    raw = cross["t"] - cross["t_send"]
    true = dict(enumerate(OFFSETS, 1))
    skew = cross["srv_site"].astype(int).map(true) - cross["site"].astype(int).map(true)
    assert ((raw - cross["oneway_s"]) - skew).abs().max() < 1e-3, "corrected by the measured offsets"
    assert (raw.abs() > 1.0).all()  # uncorrected, these would be seconds
    bound = cross["oneway_bound_s"]
    assert (bound > 0).all() and bound.max() < 1e-3, bound.describe()
    delay = SPEC["delay_ms"] / 1000  # every path crosses the WAN once at least (no client in site 1)
    assert (cross["oneway_s"] >= delay - bound).all(), cross["oneway_s"].describe()
    # far below the clocks' differences (1.5 s and more): a wrong sign or scale would show
    assert cross["oneway_s"].median() < 1.0, cross["oneway_s"].describe()
    s = json.loads((run / "summary.json").read_text())
    assert s.get("oneway_withheld") in (None, ""), s.get("oneway_withheld")


def test_too_few_hosts_is_one_line_exit_2(tmp_path: Path) -> None:
    hosts = [{"address": "192.0.2.1"}, {"address": "192.0.2.2"}]
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "provider": {"kind": "enoslib", "static": {"hosts": hosts}}}))
    code, out = _juice("run", str(spec), "--results", str(tmp_path / "results"))
    assert code == 2, out
    lines = said_lines(out)
    assert len(lines) == 1 and "provider.static.hosts" in lines[0] and "3 sites" in lines[0], out
