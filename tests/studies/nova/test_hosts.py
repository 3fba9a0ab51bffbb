"""The nova study on SSH hosts (``provider:``): the controllers on the host of site 1, a
nova-compute on each of the hosts of sites 2 and 3. The hosts are separate ones
(tests/testhosts.py: each its own root filesystem prepared by ``juice hosts prepare``, its own
processes and its own clock, OFFSETS seconds from the truth, both signs), so every file
travels over ssh. The run writes the same files as a local run of the same spec, records the
hosts and each host's clock offset (the true one, within its bound, with its sign), nova's
logs are fetched into the run and traced by `juice trace`, and nothing is left on the hosts
(files, processes, rules, qdiscs). And the one-line refusals of a provider or a role that
does not fit the sites.

Image and network services: the stand-ins (``fake-glance``, ``fake-neutron``, named so in
the manifest's deviations): the subject here is the hosts, and the real neutron (ML2/OVN)
would add ~70 s to the suite; tests/studies/nova/ runs the real ones locally."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tests import testhosts
from tests.conftest import said_lines
from tests.services.conftest import needs_lab

JUICE = [sys.executable, "-m", "juice.cli"]
OFFSETS = [0.0, +3.0, -2.0]  # each host's clock minus the truth (seconds)
SPEC: dict[str, Any] = {
    "workload": "nova", "name": "novahosts", "sites": 3, "db": ["mariadb"], "schedulers": [1],
    "controllers_site": 1, "computes": {"processes": 2, "nodes_per_process": 3, "sites": [2, 3]},
    "scenarios": ["boot_and_delete_server"], "runner": {"times": 3, "concurrency": [2], "warmup_runs": 0},
    "poll_interval_s": 0.5, "image_service": "fake-glance", "network_service": "fake-neutron"}
# what a local run writes (tests/studies/nova/test_nova_run.py checks it of its local runs: a
# local run of SPEC here too would double this test's time), the resource profile included
RUN_FILES = {"boots-1.jsonl", "boots.parquet", "iterations.jsonl", "logs", "manifest.json", "rally.json",
             "summary.json", "profile.parquet", "rabbitmq.parquet", "placement.json",
             "servers-end-1.jsonl"}  # what the window left (the invariants)
# on a test host (its own root filesystem and PID namespace; the network namespace is its
# lab site's): what is in /var/tmp/juice-host and /tmp, the JUICE iptables rules, the qdiscs,
# the processes (pid:name; the host's sshd is pid 1)
HOST_CHECK = ("ls -A /var/tmp/juice-host 2>/dev/null; echo --; ls -A /tmp; echo --; "
              "iptables -t mangle -S | grep -c JUICE || true; echo --; tc qdisc show; echo --; "
              "for p in /proc/[0-9]*; do echo ${p#/proc/}:$(cat $p/comm 2>/dev/null); done; true")
CHECKING = {"sshd", "sh", "bash", "cat", "ls", "tc", "iptables", "grep"}  # the check itself
NOVA_LOGS = {"juice-api.log", "juice-conductor.log", "juice-sched-1.log"}


def _juice(*args: str, timeout: float = 600, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``juice ARGS``; with ``log``, its output goes there as it comes (kept if the test times out)."""
    if log is None:
        return subprocess.run([*JUICE, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    with log.open("w") as f:
        rc = subprocess.run([*JUICE, *args], stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                            stdin=subprocess.DEVNULL).returncode
    return subprocess.CompletedProcess([], rc, log.read_text(errors="replace"), "")


def _write(tmp: Path, name: str, extra: dict[str, Any]) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "name": name, "results": str(tmp / name), **extra}))
    return path


def _static(hosts: list[Any]) -> dict[str, Any]:
    return {"kind": "enoslib", "static": {"hosts": [
        {"address": h.address, "port": h.port, "user": h.user, "key_file": h.key_file,
         "wan_address": h.wan_address} for h in hosts]}}


def _state(h: Any, keys: Path) -> dict[str, Any]:
    files, tmp, rules, qdiscs, procs = testhosts.ssh(h, keys, HOST_CHECK).split("--\n")
    return {"files": files.split(), "tmp": sorted(tmp.split()), "rules": rules.strip(),
            "qdiscs": sorted(qdiscs.splitlines()),
            "procs": sorted(p for p in procs.split() if p.partition(":")[2] not in CHECKING)}


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


@pytest.mark.skipif(testhosts.available() is not None, reason=f"test hosts: {testhosts.available()}")
@pytest.mark.timeout(1500)  # the whole stack on 3 hosts: ~2 min alone, 7 min at a load of 25 on 2 cores
@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_nova_on_separate_hosts_writes_a_local_runs_files_traces_and_leaves_nothing(tmp_path: Path) -> None:
    keys = tmp_path / "hosts"
    with testhosts.test_hosts(3, keys, OFFSETS, prepared=True) as (_lab, hosts):
        before = [_state(h, keys) for h in hosts]
        cp = _juice("run", str(_write(tmp_path, "onhosts", {"provider": _static(hosts)})), "--no-report",
                    timeout=1200, log=tmp_path / "run.log")
        assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
        for h, was in zip(hosts, before, strict=True):  # nothing left: files, rules, qdiscs, processes
            now = _state(h, keys)
            assert now["files"] == [] and now["rules"] == "0", (h.wan_address, now)
            assert (now["tmp"], now["qdiscs"], now["procs"]) == (was["tmp"], was["qdiscs"], was["procs"]), \
                (h.wan_address, was, now)
    (run,) = [d for d in (tmp_path / "onhosts").iterdir() if d.is_dir() and not d.name.startswith(".")]
    assert {p.name for p in run.iterdir()} == RUN_FILES, sorted(p.name for p in run.iterdir())
    man = json.loads((run / "manifest.json").read_text())
    assert man["lab"]["provider"] == "enoslib-static", man["lab"]
    assert [h["site"] for h in man["lab"]["hosts"]] == [1, 2, 3]
    assert man["versions"]["nova"].startswith("34."), man["versions"]  # asked of the host's venv
    assert man["deployment"]["computes"]["sites"] == [2, 3]
    assert man["rwratio"]["writes"] > 0  # MariaDB's counters, asked on its host
    # each host's clock as the run measured it: the true offset, its sign, within its bound
    offs = man["profile"]["clock_offsets"]
    for k, true in enumerate(OFFSETS, 1):
        o = offs[str(k)]
        assert abs(o["offset_s"] - true) <= o["rtt_s"] / 2 + 2e-6, (k, offs)
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
