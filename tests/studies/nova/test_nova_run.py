"""The nova study for real (nova 34, placement, Keystone, RabbitMQ, MariaDB; simulated computes),
through `juice plan/run/report/analyze`: runs, boots, Rally JSON, the services' logs with
request ids, and nothing left. And an accuracy test like Intel's: capacity for exactly K
servers, K+1 concurrent requests ⇒ exactly one failure (No valid host), with 1 and with 2
schedulers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from juice.lab import netns
from tests.conftest import Juice
from tests.services.conftest import needs_lab

pytestmark = needs_lab


def _spec(tmp: Path, name: str, **over: Any) -> Path:
    data: dict[str, Any] = {"workload": "nova", "name": name, "results": str(tmp / "results" / name),
                            "sites": 2, "computes": {"processes": 1, "nodes_per_process": 6}}
    data.update(over)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _runs(tmp: Path, name: str) -> list[Path]:
    return sorted(d for d in (tmp / "results" / name).iterdir() if d.is_dir() and not d.name.startswith("."))


def test_boot_and_delete_through_the_cli_with_logs_and_nothing_left(tmp_path: Path, juice: Juice) -> None:
    spec = _spec(tmp_path, "nv", scenarios=["boot_server", "boot_and_delete_server"],
                 runner={"times": 3, "concurrency": [2]}, users={"tenants": 1, "users_per_tenant": 2})
    before = set(netns.list_all())
    code, out, err = juice("run", str(spec))
    assert code == 0, err
    runs = _runs(tmp_path, "nv")
    assert len(runs) == 2
    for r in runs:
        man = json.loads((r / "manifest.json").read_text())
        boots = pd.read_parquet(r / "boots.parquet")
        assert len(boots) == 3 and boots["ok"].all() and boots["nova_boot_s"].notna().all()
        assert (boots["rally_boot_s"] >= boots["api_s"]).all()
        assert man["summary"]["success_pct"] == 100.0 and man["rwratio"]["writes"] > 0
        rally = json.loads((r / "rally.json").read_text())
        atomics = {a["name"] for it in rally["tasks"][0]["subtasks"][0]["workloads"][0]["data"]
                   for a in it["atomic_actions"]}
        deletes = "delete" in man["params"]["scenario"]
        want = {"nova.boot_server"} | ({"nova.delete_server"} if deletes else set())
        assert atomics == want
        conductor = (r / "logs" / "juice-conductor.log").read_text()
        assert all(rid in (r / "logs" / "juice-api.log").read_text() for rid in boots["request_id"])
        assert "req-" in conductor and "schedule_and_build_instances" in conductor
    code, out, _ = juice("analyze", str(tmp_path / "results" / "nv"))
    assert code == 0 and "boot_server" in out
    assert "nova: boots under load" in (tmp_path / "results" / "nv" / "report.html").read_text()
    assert set(netns.list_all()) <= before  # the lab is gone


def test_capacity_k_and_k_plus_one_requests_fail_exactly_one(tmp_path: Path, juice: Juice) -> None:
    # 2 nodes x 2 vCPUs, a 1-vCPU flavor: exactly K = 4 servers fit; 5 boot at once
    spec = _spec(tmp_path, "acc", computes={"processes": 1, "nodes_per_process": 2, "vcpus": 2},
                 flavor={"vcpus": 1, "ram_mb": 256, "disk_gb": 1}, schedulers=[1, 2],
                 scenarios=["boot_server"], runner={"times": 5, "concurrency": [5]},
                 allow_over_capacity=True, poll_interval_s=0.5)
    code, _, err = juice("run", str(spec), "--no-report")
    assert code == 0, err
    runs = _runs(tmp_path, "acc")
    assert len(runs) == 2
    for r in runs:
        s = json.loads((r / "summary.json").read_text())
        assert (s["active"], s["failed"]) == (4, 1), (r.name, s)
        assert any("No valid host" in k for k in s["faults"]), s["faults"]
