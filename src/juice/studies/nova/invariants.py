"""What must hold after every nova run, checked from what the run stored (issue 41).

    inv = check(run_dir)          # from placement.json, servers-end-*.jsonl and manifest.json
    inv.broken                    # ["juice-c1-n0002 VCPU: 3 used of 2 (ratio 1.0)", ...]
    inv.checked                   # the invariants that could be checked for this run

``placement.json`` is written right after the run (its servers deleted by the driver's
cleanup; the deployment's preload VMs still running). From it and the manifest:

- **capacity**: no resource provider uses more of a class than (total - reserved) x
  allocation_ratio — placement's own promise; a break is an over-allocation (the race issue 41
  asks about would show here);
- **no allocation without a server**: the usages summed over every provider equal the preload
  VMs' (``running_vms`` x the flavor) — anything more is an allocation whose server is gone
  (leaked by a failed boot, a reschedule or a delete).

From ``servers-end-<site>.jsonl``, what the window left before the driver's cleanup deleted it
(``juice.studies.nova.scenarios.snapshot``: every server of the run with its status, task
state and host, and placement's allocations for the first 500):

- **no server stuck**: every boot's iteration has ended (ACTIVE, ERROR or timed out), so a
  server still in BUILD, or with a task in progress (``task_state`` set), is stuck — seed 004's
  "stuck in BUILD" after a conductor's RPC timed out;
- **every ACTIVE server has exactly its allocation**: one resource provider, the server's
  own host, holding exactly the flavor (VCPU, MEMORY_MB, DISK_GB); none, two providers, another
  host or other amounts is broken (a claim lost or doubled by a retry or a reschedule).

Each is checked only where the run has the data: a run of more than 50 providers lists none
(``placement.json`` has only the count), a run without ``placement.json`` (earlier versions)
is "not checked", never "held".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from juice.results.samples import json_object

CLASSES = {"VCPU": "vcpus", "MEMORY_MB": "ram_mb", "DISK_GB": "disk_gb"}


@dataclass
class Invariants:
    run: str
    checked: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    why_not: str = ""  # when nothing could be checked


def check(run_dir: Path) -> Invariants:
    inv = Invariants(run_dir.name)
    _servers(run_dir, inv)
    _placement(run_dir, inv)
    if inv.checked:
        inv.why_not = ""
    return inv


def _rows(run_dir: Path) -> list[dict[str, object]] | None:
    """The end-of-window snapshot's rows (every driver's), None when the run has none."""
    import json

    files = sorted(run_dir.glob("servers-end-*.jsonl"))
    if not files:
        return None
    rows: list[dict[str, object]] = []
    for f in files:
        for line in f.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if isinstance(row, dict):
                    rows.append(row)
    return rows


def _servers(run_dir: Path, inv: Invariants) -> None:
    rows = _rows(run_dir)
    if rows is None:
        return
    errors = [str(r["error"]) for r in rows if "error" in r]
    if errors:
        inv.why_not = f"the end-of-window list failed: {errors[0]}"
        return
    servers = [r for r in rows if "id" in r]
    inv.checked.append("no server stuck")
    stuck = [r for r in servers if r.get("status") == "BUILD" or r.get("task_state")]
    for r in stuck[:10]:
        inv.broken.append(f"server {r.get('id')} stuck: {r.get('status')}, task {r.get('task_state')}, "
                          f"host {r.get('host') or 'none'}")
    if len(stuck) > 10:
        inv.broken.append(f"... and {len(stuck) - 10} more servers stuck")
    asked = [r for r in servers if "allocations" in r]
    if not asked:
        return
    inv.checked.append("every ACTIVE server has exactly its allocation")
    names = _provider_names(run_dir)
    bad = 0
    for r in asked:
        if r.get("status") != "ACTIVE":
            continue
        why = _allocation_wrong(r, names)
        if why:
            bad += 1
            if bad <= 10:
                inv.broken.append(f"ACTIVE server {r.get('id')} on {r.get('host')}: {why}")
    if bad > 10:
        inv.broken.append(f"... and {bad - 10} more ACTIVE servers with a wrong allocation")


def _provider_names(run_dir: Path) -> dict[str, str]:
    """Resource provider uuid -> name, from ``placement.json`` (empty when it lists none)."""
    pl = json_object(run_dir / "placement.json")
    listed = pl.get("listed") if pl else None
    if not isinstance(listed, list):
        return {}
    return {str(rp.get("uuid")): str(rp.get("name")) for rp in listed if isinstance(rp, dict)}


def _allocation_wrong(row: dict[str, object], names: dict[str, str]) -> str:
    """Why an ACTIVE server's allocation is not exactly its flavor on its host ("" when it is)."""
    allocs = row.get("allocations")
    flavor = row.get("flavor")
    if not isinstance(allocs, dict) or not isinstance(flavor, dict):
        return ""
    if not allocs:
        return "no allocation"
    if len(allocs) != 1:
        return f"allocations on {len(allocs)} resource providers"
    (rp, res), = allocs.items()
    host = row.get("host")
    name = names.get(str(rp))
    if name is not None and host and name != host:
        return f"allocated on {name}, not on its host"
    want = {"VCPU": flavor.get("vcpus"), "MEMORY_MB": flavor.get("ram"), "DISK_GB": flavor.get("disk")}
    got = res if isinstance(res, dict) else {}
    diff = [f"{k} {got.get(k, 0)} (flavor {v})" for k, v in want.items()
            if isinstance(v, int | float) and v and float(got.get(k, 0) or 0) != float(v)]
    return ", ".join(diff)


def _placement(run_dir: Path, inv: Invariants) -> None:
    pl = json_object(run_dir / "placement.json")
    listed = pl.get("listed")
    if not pl or "error" in pl or not isinstance(listed, list):
        if not inv.checked and not inv.why_not:
            inv.why_not = pl.get("error", "no placement.json (a run of an earlier version)") if pl else \
                "no placement.json (a run of an earlier version)"
        return
    if not listed:
        if not inv.checked and not inv.why_not:
            inv.why_not = f"{pl.get('providers', '?')} resource providers: more than placement.json lists"
        return
    inv.checked.append("capacity")
    used: dict[str, float] = {}
    for rp in listed:
        invs, usages = rp.get("inventories") or {}, rp.get("usages") or {}
        for cls, u in usages.items():
            used[cls] = used.get(cls, 0.0) + float(u)
            i = invs.get(cls)
            if not i:
                if u:
                    inv.broken.append(f"{rp.get('name')} {cls}: {u:g} used without an inventory")
                continue
            cap = (float(i.get("total", 0)) - float(i.get("reserved", 0))) \
                * float(i.get("allocation_ratio", 1.0))
            if float(u) > cap + 1e-9:
                inv.broken.append(f"{rp.get('name')} {cls}: {u:g} used of {cap:g} "
                                  f"(total {i.get('total')}, reserved {i.get('reserved')}, "
                                  f"ratio {i.get('allocation_ratio')})")
    man = json_object(run_dir / "manifest.json")
    flavor = (man.get("spec") or {}).get("flavor") if isinstance(man.get("spec"), dict) else None
    running = man.get("running_vms")
    if int(pl.get("providers", len(listed))) == len(listed) and isinstance(running, int) \
            and isinstance(flavor, dict):
        inv.checked.append("no allocation without a server")
        for cls, key in CLASSES.items():
            want = float(running) * float(flavor.get(key, 0) or 0)
            got = used.get(cls, 0.0)
            if got > want + 1e-9:
                inv.broken.append(f"{cls}: {got:g} allocated after the run, {want:g} expected "
                                  f"({running} preload VMs): {got - want:g} without a server")


def summary(dirs: list[Path]) -> tuple[int, int, list[Invariants]]:
    """(runs checked, runs with a broken invariant, those runs' results)."""
    res = [check(d) for d in dirs]
    checked = [r for r in res if r.checked]
    bad = [r for r in checked if r.broken]
    return len(checked), len(bad), bad
