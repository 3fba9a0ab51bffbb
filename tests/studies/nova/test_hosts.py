"""The nova study on SSH hosts (``provider:``): the controllers on the host of site 1, a
nova-compute on each of the hosts of sites 2 and 3 (tests/hosts/sshhosts.py: each host has
its own /var/tmp/juice-host, so every file travels over ssh), the same run files as a local
run of the same spec, the hosts in the manifest, nova's logs fetched into the run and traced
by `juice trace`, and nothing left on the hosts. And the one-line refusals of a provider or a
role that does not fit the sites."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests.conftest import said_lines
from tests.hosts.sshhosts import SSHD, plain_ssh, ssh_hosts
from tests.services.conftest import needs_lab

JUICE = [sys.executable, "-m", "juice.cli"]
SPEC: dict[str, Any] = {
    "workload": "nova", "name": "novahosts", "sites": 3, "db": ["mariadb"], "schedulers": [1],
    "controllers_site": 1, "computes": {"processes": 2, "nodes_per_process": 3, "sites": [2, 3]},
    "scenarios": ["boot_and_delete_server"], "runner": {"times": 3, "concurrency": [2], "warmup_runs": 0},
    "poll_interval_s": 0.5}
# what a local run writes (tests/studies/nova/test_nova_run.py checks it of its local runs: a
# local run of SPEC here too would double this test's ~100 s), the resource profile included
RUN_FILES = {"boots-1.jsonl", "boots.parquet", "iterations.jsonl", "logs", "manifest.json", "rally.json",
             "summary.json", "profile.parquet", "rabbitmq.parquet", "placement.json",
             "servers-end-1.jsonl"}  # what the window left (the invariants)
# on a test host: what is in its /var/tmp/juice-host (Ansible run by other tests on this machine
# may leave an ansible-tmp there), the JUICE iptables rules, the names of the processes in its
# network namespace (the hosts share this machine's pids: other labs' processes are elsewhere)
HOST_CHECK = ("ls -A /var/tmp/juice-host; echo --; iptables -t mangle -S | grep -c JUICE || true; echo --; "
              "me=$(readlink /proc/self/ns/net); for p in /proc/[0-9]*; do "
              "[ \"$(readlink $p/ns/net 2>/dev/null)\" = \"$me\" ] && "
              "echo ${p#/proc/}:$(cat $p/comm 2>/dev/null); done; true")
CHECKING = {"sshd", "sh", "bash", "cat", "readlink"}  # the check itself
NOVA_LOGS = {"juice-api.log", "juice-conductor.log", "juice-sched-1.log"}


def _juice(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JUICE, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _write(tmp: Path, name: str, extra: dict[str, Any]) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "name": name, "results": str(tmp / name), **extra}))
    return path


def _static(hosts: list[Any]) -> dict[str, Any]:
    return {"kind": "enoslib", "static": {"hosts": [
        {"address": h.address, "port": h.port, "user": h.user, "key_file": h.key_file,
         "wan_address": h.wan_address} for h in hosts]}}


@pytest.mark.parametrize(("extra", "says"), [
    ({"provider": {"kind": "enoslib", "static": {"hosts": [{"address": "192.0.2.1"}]}}},
     "provider.static.hosts: 1 host(s) for 3 sites"),
    ({"computes": {"processes": 2, "sites": [2, 4]}}, "computes.sites: 4 is not a site"),
    ({"controllers_site": 5}, "controllers_site: 5 is not a site"),
])
def test_a_role_or_provider_that_does_not_fit_the_sites_is_one_line_exit_2(
        tmp_path: Path, extra: dict[str, Any], says: str) -> None:
    cp = _juice("plan", str(_write(tmp_path, "bad", extra)), timeout=120)
    assert cp.returncode == 2, cp.stdout + cp.stderr
    lines = said_lines(cp.stderr)
    assert len(lines) == 1 and says in lines[0], cp.stderr


@pytest.mark.skipif(not SSHD.exists(), reason="no sshd (scripts/setup.sh installs it)")
@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_nova_on_ssh_hosts_writes_a_local_runs_files_traces_and_leaves_nothing(tmp_path: Path) -> None:
    with ssh_hosts(3, tmp_path / "hosts") as (_lab, hosts):
        before = [plain_ssh(h, tmp_path / "hosts", HOST_CHECK).split("--\n")[2].split() for h in hosts]
        cp = _juice("run", str(_write(tmp_path, "onhosts", {"provider": _static(hosts)})), "--no-report")
        assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
        for h, was in zip(hosts, before, strict=True):  # nothing left: files, rules, processes
            left = plain_ssh(h, tmp_path / "hosts", HOST_CHECK).split("--\n")
            files = [f for f in left[0].split() if not f.startswith("ansible")]  # see HOST_CHECK
            procs = [p for p in left[2].split() if p not in was and p.partition(":")[2] not in CHECKING]
            assert (files, left[1].strip(), procs) == ([], "0", []), (h.wan_address, left)
    (run,) = [d for d in (tmp_path / "onhosts").iterdir() if d.is_dir() and not d.name.startswith(".")]
    assert {p.name for p in run.iterdir()} == RUN_FILES, sorted(p.name for p in run.iterdir())
    man = json.loads((run / "manifest.json").read_text())
    assert man["lab"]["provider"] == "enoslib-static", man["lab"]
    assert [h["site"] for h in man["lab"]["hosts"]] == [1, 2, 3]
    assert man["versions"]["nova"].startswith("34."), man["versions"]  # asked of the host's venv
    assert man["deployment"]["computes"]["sites"] == [2, 3]
    assert man["rwratio"]["writes"] > 0  # MariaDB's counters, asked on its host
    boots = pd.read_parquet(run / "boots.parquet")
    assert len(boots) == 3 and boots["ok"].all() and boots["nova_boot_s"].notna().all()
    logs = {p.name for p in (run / "logs").iterdir()}
    assert logs >= NOVA_LOGS and logs & {"juice-c1.log", "juice-c2.log"}, logs
    api = (run / "logs" / "juice-api.log").read_text()
    assert all(rid in api for rid in boots["request_id"])
    built = "".join((run / "logs" / f).read_text() for f in logs if f.startswith("juice-c"))
    assert all(sid in built for sid in boots["id"]), "the computes' logs came from their hosts"
    cp = _juice("trace", str(run), "--out", str(tmp_path / "trace"), timeout=300)
    assert cp.returncode == 0, cp.stderr[-3000:]
    traced = pd.read_parquet(tmp_path / "trace" / "trace_boots.parquet")
    assert len(traced) == 3 and traced["matches_api"].all() and set(traced["state"]) == {"active"}
