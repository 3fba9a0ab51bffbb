"""The scheduler-database study on SSH hosts (``provider:``): the server, the readers and the
updaters run on the host of their site (every connection is made by a worker there), the
results have the same files and rows as the same spec run locally, and nothing is left on
the host. The host is a separate one (tests/testhosts.py: its own root filesystem prepared by
``juice hosts prepare``, processes and clock, 2.5 s behind this machine's): the run records
its clock offset, with the right sign, within its bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests import testhosts
from tests.services.conftest import needs_lab

pytestmark = [
    *needs_lab,
    pytest.mark.skipif(testhosts.available() is not None, reason=f"test hosts: {testhosts.available()}"),
]
OFFSET = -2.5  # the host's clock minus the truth (seconds)
JUICE = [sys.executable, "-m", "juice.cli"]
SPEC = {"workload": "scheduler-db", "name": "sdbhosts", "backends": ["mariadb"],
        "tracks": ["historical-2013.1"], "nodes": [300], "schedulers": [1, 2], "updates": [False, True],
        "repetitions": 1, "warmup_s": 0.2, "update_workers": 1, "lab": {"sites": 1, "delay_ms": 0}}


def _run(tmp: Path, name: str, extra: dict[str, object]) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **extra}))
    out = tmp / name
    cp = subprocess.run([*JUICE, "run", str(path), "--results", str(out)], capture_output=True, text=True,
                        timeout=600, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    return out


def _runs(root: Path) -> dict[str, Path]:
    """Run key -> run directory."""
    out = {}
    for d in root.iterdir():
        if d.is_dir() and (d / "manifest.json").exists():
            out[json.loads((d / "manifest.json").read_text())["run_key"]] = d
    return out


def test_scheduler_db_on_a_host_gives_the_runs_of_a_local_lab(tmp_path: Path) -> None:
    with testhosts.test_hosts(1, tmp_path / "hosts", [OFFSET], prepared=True) as (_lab, hosts):
        h = hosts[0]
        provider = {"kind": "enoslib", "static": {"hosts": [
            {"address": h.address, "port": h.port, "user": h.user, "key_file": h.key_file,
             "wan_address": h.wan_address}]}}
        remote = _runs(_run(tmp_path, "hosts", {"provider": provider}))
        left = testhosts.ssh(h, tmp_path / "hosts", "ls -A /var/tmp/juice-host; "
                         "iptables -t mangle -S | grep -c JUICE || true")
        assert left.split() == ["0"], left
    local = _runs(_run(tmp_path, "local", {}))
    assert set(remote) == set(local) and len(local) == 4  # the same points, by run key
    for key, d in remote.items():
        names = sorted(p.name for p in d.iterdir())
        assert names == sorted(p.name for p in local[key].iterdir()), key
        man = json.loads((d / "manifest.json").read_text())
        assert man["lab"]["provider"]["provider"] == "enoslib-static", man["lab"]
        off = man["profile"]["clock_offsets"]["1"]  # the host's clock as the run measured it
        assert abs(off["offset_s"] - OFFSET) <= off["rtt_s"] / 2 + 2e-6, off
        for table in [p.name for p in d.glob("*.parquet") if p.name != "profile.parquet"]:
            a, b = pd.read_parquet(d / table), pd.read_parquet(local[key] / table)
            assert list(a.columns) == list(b.columns) and len(a) == len(b), table
            if "rows" in a.columns:  # every read saw the whole population, on the host too
                assert (a["rows"] == b["rows"]).all(), table
