"""``juice run EXAMPLE --dry-run`` for every example on hosts: without contacting anything, the
provider, site -> host with what the study runs there, and the WAN commands per host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ON_HOSTS = sorted(p for p in (ROOT / "examples").glob("*.yaml")
                  if (yaml.safe_load(p.read_text()) or {}).get("provider", {}).get("kind") == "enoslib")


def test_there_are_examples_on_hosts_for_every_study() -> None:
    studies = {(yaml.safe_load(p.read_text()) or {}).get("workload", "keystone") for p in ON_HOSTS}
    assert {"keystone", "messaging", "scheduler-db"} <= studies, ON_HOSTS


@pytest.mark.parametrize("example", ON_HOSTS, ids=lambda p: p.name)
def test_dry_run_says_what_runs_on_each_host(example: Path) -> None:
    sites = yaml.safe_load(example.read_text())
    cp = subprocess.run([sys.executable, "-m", "juice.cli", "run", str(example), "--dry-run"],
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    out = cp.stdout
    assert "nothing is reserved or contacted" in out, out[:2000]
    site_lines = [ln for ln in out.splitlines() if ln.strip().startswith("site 1:")]
    assert site_lines and all("; runs " in ln for ln in site_lines), out[:3000]
    assert "WAN (ONE-WAY delays" in out
    assert sites is not None
