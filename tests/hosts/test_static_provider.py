"""The static provider on this machine: separate test hosts in the sites of a lab
(tests/testhosts.py: each its own root filesystem prepared by ``juice hosts prepare``, its own
processes, sshd and clock, at OFFSETS from this machine's), reached only over ssh.

- RemoteLab: the WAN shaped on the hosts (this kernel has no netem: the probe says so and the
  userspace delayer shapes instead), its RTT check, and nothing left on the hosts after.
- The Keystone study on Galera over SSH (`juice run` with `provider:`), results in the same
  form as a local run's, reportable together with a local run of the same spec.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from juice.lab import spec as labspec
from juice.lab.remote import RemoteLab
from tests import testhosts
from tests.services.conftest import needs_lab

pytestmark = [
    *needs_lab,
    pytest.mark.skipif(testhosts.available() is not None, reason=f"test hosts: {testhosts.available()}"),
]
OFFSETS = [-1.5, 2.0, 0.75]  # each host's clock minus the truth (seconds)
JUICE = str(Path(sys.executable).parent / "juice")


def test_remote_lab_shapes_the_wan_on_the_hosts_checks_it_and_leaves_nothing(tmp_path: Path) -> None:
    said: list[str] = []
    with testhosts.test_hosts(3, tmp_path / "hosts", OFFSETS, prepared=True) as (_lab, hosts):
        ls = labspec.parse({"name": "rtest", "sites": 3, "delay_ms": 20})
        with RemoteLab.up(ls, hosts, progress=said.append) as rl:
            assert rl.backend == "userspace" and any("no netem" in s for s in said), said
            rep = rl.check(probes=10, tol_ms=2.0)  # see below
            assert rep.ok, rep.to_dict()
            assert all(abs((p.median_rtt_ms or 0) - 40.0) < 2.0 for p in rep.pairs), rep.to_dict()
            facts = rl.facts()
            assert [h["site"] for h in facts["hosts"]] == [1, 2, 3] and facts["wan_backend"] == "userspace"
            pids = [int(facts["wan"][str(k)]["pid"]) for k in (1, 2, 3)]
            on_host = testhosts.ssh(
                hosts[1], tmp_path / "hosts", "ls /var/tmp/juice-host/rtest; iptables -t mangle -S"
            )
            assert "JUICE-HWAN" in on_host and "agent.json" in on_host
            # a WAN change on the same hosts
            rl.set_wan(labspec.parse({"name": "rtest", "sites": 3, "delay_ms": 5}))
            # judged at 2 ms (1 by default) over 10 probes: the suite's other workers load the
            # cores the hosts' delayers run on; 10 ms is still told from the 40 ms before
            rep = rl.check(probes=10, tol_ms=2.0)
            assert rep.ok, rep.to_dict()
            pids += [int(rl.wan_facts[k]["pid"]) for k in (1, 2, 3)]
        for k, h in enumerate(hosts, 1):  # nothing left: files, rules, processes (the delayers'
            # pids are the hosts' own: each host has its PID namespace)
            mine = " ".join(str(p) for i, p in enumerate(pids) if i % 3 == k - 1)
            left = testhosts.ssh(
                h,
                tmp_path / "hosts",
                "ls -A /var/tmp/juice-host; iptables -t mangle -S | grep -c JUICE || true; "
                f"for p in {mine}; do [ -d /proc/$p ] && echo alive $p; done; true",
            )
            assert left.split() == ["0"], left


def _spec(path: Path, provider: dict | None, results: Path, delays: list[float] | None = None) -> Path:
    data = {
        "name": "sshq",
        "seed": 1,
        "rdbms": ["galera"],
        "sites": [3],
        "wan": {"delay_ms": delays or [0, 25]},
        "load": ["light"],
        "scenarios": ["authenticate_user_and_validate_token"],
        "runner": {"times": 8, "concurrency": 2, "warmup_runs": 0},
        "keystone": {"cache": [True], "workers": 1, "password_hash_rounds": 4},
        "results": str(results),
        # faults on the hosts as locally: a kill by recorded pid and its restart, a short cut
        # (site 3 serves no iteration of the light load: the run stays error-free)
        "faults": [{"at_iteration": 0, "kill": "memcached", "site": 3, "restart_after_s": 0},
                   {"at_iteration": 0, "partition": 3, "duration_s": 0.2}],
    }
    if provider is not None:
        data["provider"] = provider
    path.write_text(yaml.safe_dump(data))
    return path


def test_keystone_on_galera_over_ssh_gives_results_like_a_local_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with testhosts.test_hosts(3, tmp_path / "hosts", OFFSETS, prepared=True) as (_lab, hosts):
        static = {
            "hosts": [
                {
                    "address": h.address,
                    "port": h.port,
                    "user": h.user,
                    "key_file": h.key_file,
                    "wan_address": h.wan_address,
                }
                for h in hosts
            ]
        }
        spec = _spec(tmp_path / "ssh.yaml", {"kind": "enoslib", "static": static}, results / "ssh")
        t_before = time.time()
        cp = subprocess.run(
            [JUICE, "run", str(spec)], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
        )
        t_after = time.time()
        out = cp.stdout + cp.stderr
        assert cp.returncode == 0, out
        assert "no netem" in out and "userspace delayer" in out, out
        for h in hosts:
            left = testhosts.ssh(
                h,
                tmp_path / "hosts",
                "ls -A /var/tmp/juice-host; iptables -t mangle -S | grep -c JUICE || true",
            )
            assert left.split() == ["0"], left
    runs = sorted(d for d in (results / "ssh").iterdir() if d.is_dir())
    assert len(runs) == 2, runs
    import pandas as pd

    for run in runs:
        man = json.loads((run / "manifest.json").read_text())
        prov = man["wan"]["provider"]
        assert prov["provider"] == "enoslib-static" and len(prov["hosts"]) == 3, prov
        assert man["wan"]["check"]["ok"], man["wan"]["check"]
        assert man["failed_iterations"] == 0 and man["iterations"] == 8, man
        for f in ("iterations.jsonl", "rally.json", "actions.parquet", "events.jsonl"):
            assert (run / f).exists(), f
        kill, cut = man["faults"]
        assert (kill["action"], cut["action"]) == ("kill", "partition"), man["faults"]
        for e in (kill, cut):
            assert e["error"] is None and e["undo_error"] is None and e["t_end"] > e["t_start"], e
        assert kill["detail"]["pid"] != kill["detail"]["restart"]["pid"], kill
        # the resource profile of every host: the servers per site, on this machine's clock
        prof = man["profile"]
        assert prof["source"] == "hosts" and prof["errors"] == 0, prof
        assert set(prof["clock_offsets"]) == {"1", "2", "3"}, prof
        for k, true in enumerate(OFFSETS, 1):  # each host's true offset, within its bound
            o = prof["clock_offsets"][str(k)]
            assert o["rtt_s"] > 0 and abs(o["offset_s"] - true) <= o["rtt_s"] / 2 + 2e-6, (k, o)
        df = pd.read_parquet(run / "profile.parquet")
        comps = df.groupby("site")["component"].agg(lambda c: set(c.astype(str)))
        for site in (1, 2, 3):
            assert {"keystone", "galera", "memcached", "link", "juice-agent"} <= comps[site], comps
        assert "load-driver" in set().union(*comps), comps
        # this machine's clock (the hosts' own are seconds off: corrected by their offsets)
        assert t_before < df["time"].min() and df["time"].max() < t_after
    delays = sorted(json.loads((r / "manifest.json").read_text())["wan"]["point"] for r in runs)
    assert len(set(delays)) == 2

    # the same spec run locally at its first WAN point, into the same results root: one report
    # over both (one point in common is the comparison; a second would only cost time)
    local = _spec(tmp_path / "local.yaml", None, results / "local", delays=[0])
    cp = subprocess.run(
        [JUICE, "run", str(local)], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    both = pd.concat(
        [
            pd.read_parquet(r / "actions.parquet")
            for r in sorted(p for d in ("ssh", "local") for p in (results / d).iterdir() if p.is_dir())
        ]
    )
    # 2 runs on hosts + 1 locally, 8 iterations of 2 atomic actions each
    assert set(both.columns) >= {"run_id", "operation", "duration_s"} and len(both) == 3 * 8 * 2
    # the same points (run_id = the point's parameters), measured on SSH hosts and locally
    assert both["run_id"].nunique() == 2
    cp = subprocess.run(
        [JUICE, "report", str(results / "ssh"), str(results / "local"), "-o", str(tmp_path / "both.html")],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert cp.returncode == 0 and (tmp_path / "both.html").exists(), cp.stdout + cp.stderr
