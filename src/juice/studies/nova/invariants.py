"""What must hold after every nova run, checked from what the run stored (issue 41).

    inv = check(run_dir)          # from placement.json and manifest.json: old runs too
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
    pl = json_object(run_dir / "placement.json")
    listed = pl.get("listed")
    if not pl or "error" in pl or not isinstance(listed, list):
        inv.why_not = pl.get("error", "no placement.json (a run of an earlier version)") if pl else \
            "no placement.json (a run of an earlier version)"
        return inv
    if not listed:
        inv.why_not = f"{pl.get('providers', '?')} resource providers: more than placement.json lists"
        return inv
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
    return inv


def summary(dirs: list[Path]) -> tuple[int, int, list[Invariants]]:
    """(runs checked, runs with a broken invariant, those runs' results)."""
    res = [check(d) for d in dirs]
    checked = [r for r in res if r.checked]
    bad = [r for r in checked if r.broken]
    return len(checked), len(bad), bad
