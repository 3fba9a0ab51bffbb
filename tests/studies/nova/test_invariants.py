"""After every nova run: no provider over capacity × allocation ratio, no allocation without
its server (juice.studies.nova.invariants), checked from the run's placement.json and
manifest, and stated in the report's findings — a broken one as a finding, never silently."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from juice.report.findings import BROKEN
from juice.studies.nova import invariants
from juice.studies.nova.findings import invariant_findings

INV = {"VCPU": {"total": 2, "reserved": 0, "allocation_ratio": 1.0},
       "MEMORY_MB": {"total": 4096, "reserved": 512, "allocation_ratio": 1.5},
       "DISK_GB": {"total": 20, "reserved": 0, "allocation_ratio": 1.0}}
FLAVOR = {"name": "f", "vcpus": 1, "ram_mb": 512, "disk_gb": 1}


def _run(root: Path, name: str, usages: list[dict[str, int]], running: int = 0,
         providers: int | None = None) -> Path:
    d = root / name
    d.mkdir()
    listed = [{"name": f"n{i}", "uuid": str(i), "generation": 1, "inventories": INV, "usages": u}
              for i, u in enumerate(usages)]
    (d / "placement.json").write_text(json.dumps({"providers": providers or len(listed), "listed": listed}))
    (d / "manifest.json").write_text(json.dumps({"running_vms": running, "spec": {"flavor": FLAVOR}}))
    return d


def test_a_clean_run_holds_every_invariant(tmp_path: Path) -> None:
    d = _run(tmp_path, "ok", [{"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, {"VCPU": 0}], running=1)
    inv = invariants.check(d)
    assert inv.checked == ["capacity", "no allocation without a server"] and inv.broken == []


def test_three_allocations_on_a_two_vcpu_node_break_capacity(tmp_path: Path) -> None:
    d = _run(tmp_path, "over", [{"VCPU": 3, "MEMORY_MB": 1536, "DISK_GB": 3}], running=3)
    inv = invariants.check(d)
    assert inv.broken == ["n0 VCPU: 3 used of 2 (total 2, reserved 0, ratio 1.0)"]


def test_memory_capacity_counts_reserved_and_the_ratio(tmp_path: Path) -> None:
    # (4096 - 512) x 1.5 = 5376 MB: 5376 fits, 5377 does not
    ok = invariants.check(_run(tmp_path, "a", [{"MEMORY_MB": 5376}]))
    bad = invariants.check(_run(tmp_path, "b", [{"MEMORY_MB": 5377}]))
    assert not [b for b in ok.broken if "used of" in b]
    assert [b for b in bad.broken if "used of" in b] == [
        "n0 MEMORY_MB: 5377 used of 5376 (total 4096, reserved 512, ratio 1.5)"]


def test_an_allocation_left_after_the_run_is_named(tmp_path: Path) -> None:
    d = _run(tmp_path, "leak", [{"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}, {"VCPU": 1, "MEMORY_MB": 512,
                                                                          "DISK_GB": 1}], running=1)
    inv = invariants.check(d)
    assert inv.broken == [
        "VCPU: 2 allocated after the run, 1 expected (1 preload VMs): 1 without a server",
        "MEMORY_MB: 1024 allocated after the run, 512 expected (1 preload VMs): 512 without a server",
        "DISK_GB: 2 allocated after the run, 1 expected (1 preload VMs): 1 without a server"]


def test_what_cannot_be_checked_is_not_called_held(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    assert invariants.check(old).checked == [] and "earlier version" in invariants.check(old).why_not
    many = _run(tmp_path, "many", [], providers=400)
    assert invariants.check(many).checked == [] and "400 resource providers" in invariants.check(many).why_not
    partial = _run(tmp_path, "partial", [{"VCPU": 1}], running=0, providers=2)
    assert invariants.check(partial).checked == ["capacity"]  # the sum needs every provider


def test_findings_name_a_broken_invariant_and_count_the_runs(tmp_path: Path) -> None:
    good = _run(tmp_path, "g", [{"VCPU": 0}])
    bad = _run(tmp_path, "b", [{"VCPU": 3}])
    (f,) = invariant_findings(pd.DataFrame({"dir": [str(good), str(bad)]}))
    assert f.verdict == BROKEN and f.text.startswith("INVARIANT BROKEN in 1 of 2 runs checked: b: n0 VCPU")
    (ok,) = invariant_findings(pd.DataFrame({"dir": [str(good)]}))
    assert ok.verdict is None and "held after every run checked (1 of 1)" in ok.text


def _servers(d: Path, rows: list[dict[str, object]]) -> None:
    (d / "servers-end-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


SFLAVOR = {"vcpus": 1, "ram": 512, "disk": 1, "original_name": "f"}
EXACT = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def test_the_servers_the_window_left_are_checked_one_by_one(tmp_path: Path) -> None:
    d = _run(tmp_path, "srv", [{"VCPU": 0}, {"VCPU": 0}], running=0)
    _servers(d, [
        {"id": "a", "status": "ACTIVE", "task_state": None, "host": "n0", "flavor": SFLAVOR,
         "allocations": {"0": EXACT}},                                     # exact: holds
        {"id": "b", "status": "ACTIVE", "task_state": None, "host": "n1", "flavor": SFLAVOR,
         "allocations": {"0": EXACT}},                                     # on another host
        {"id": "c", "status": "ACTIVE", "task_state": None, "host": "n0", "flavor": SFLAVOR,
         "allocations": {"0": EXACT, "1": EXACT}},                         # doubled
        {"id": "d", "status": "ACTIVE", "task_state": None, "host": "n0", "flavor": SFLAVOR,
         "allocations": {"0": {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 1}}},  # wrong amount
        {"id": "e", "status": "ACTIVE", "task_state": None, "host": "n0", "flavor": SFLAVOR,
         "allocations": {}},                                               # none
        {"id": "f", "status": "BUILD", "task_state": "spawning", "host": "n1", "flavor": SFLAVOR,
         "allocations": {"1": EXACT}},                                     # stuck
        {"id": "g", "status": "ERROR", "task_state": None, "host": None, "flavor": SFLAVOR,
         "allocations": {}},                                               # failed: not stuck
    ])
    inv = invariants.check(d)
    assert inv.checked[:2] == ["no server stuck", "every ACTIVE server has exactly its allocation"]
    assert inv.broken == [
        "server f stuck: BUILD, task spawning, host n1",
        "ACTIVE server b on n1: allocated on n0, not on its host",
        "ACTIVE server c on n0: allocations on 2 resource providers",
        "ACTIVE server d on n0: VCPU 2 (flavor 1)",
        "ACTIVE server e on n0: no allocation"]


def test_a_failed_end_of_window_list_is_not_called_held(tmp_path: Path) -> None:
    d = tmp_path / "err"
    d.mkdir()
    _servers(d, [{"error": "GET /servers/detail -> 504: gateway timeout"}])
    inv = invariants.check(d)
    assert inv.checked == [] and "504" in inv.why_not
    no_alloc = tmp_path / "noalloc"
    no_alloc.mkdir()
    _servers(no_alloc, [{"id": "a", "status": "ACTIVE", "task_state": None, "host": "n0", "flavor": SFLAVOR}])
    assert invariants.check(no_alloc).checked == ["no server stuck"]  # placement not asked
