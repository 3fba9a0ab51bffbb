"""Acceptance on hosts of your own (virtual machines, bare metal, or the test hosts of
benchmarks/hosts_launch.py): prepare them, run every study's hosts example on them, check that
nothing is left behind, and print a table with the time of each step. Outside the suite.

    /var/cache/juice/venv/bin/python benchmarks/hosts_acceptance.py INVENTORY.yaml \\
        [--offline] [--full] [--only keystone,scheduler-db,messaging,nova] [--out DIR]

INVENTORY: the static provider's hosts (docs/multi-host.md), as a YAML file that is either a
list of hosts, a mapping with ``hosts:`` (what hosts_launch.py writes; an optional
``true_offsets_s`` list is compared with what Juice measured), or a spec with
``provider.static.hosts``. At least three hosts; site k = the k-th host.

Steps, each timed:
1. ``juice hosts prepare`` (``--offline``: the hosts reach no registry, everything comes from
   here) with a spec made of examples/static-hosts.yaml and the inventory;
2. each host's clock probed over ssh (the minimum-RTT sample of 20), and each host's state
   recorded: its processes, Juice's iptables/nftables rules, its qdiscs, its juice directories
   under /var/tmp and /tmp, its network namespaces;
3. every study's hosts example (examples/static-hosts.yaml: Keystone; hosts-scheduler-db.yaml;
   hosts-messaging.yaml; hosts-nova.yaml) with the inventory as its ``provider.static.hosts``,
   ``juice run`` into OUT/<study>; by default trimmed to a few runs each (QUICK: the
   ``--set`` overrides below, printed), ``--full`` runs the examples as they are (hours);
   after each, the hosts' state again: anything new is a leftover;
4. the clock offsets each run recorded (``profile.clock_offsets``) against the probe (and the
   inventory's ``true_offsets_s``).

Exit 0 when every step passed and nothing was left, 1 otherwise. Everything this script makes
on this machine is under OUT (kept: the runs, the logs, summary.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"keystone": "static-hosts.yaml", "scheduler-db": "hosts-scheduler-db.yaml",
            "messaging": "hosts-messaging.yaml", "nova": "hosts-nova.yaml"}
# --quick (the default): a few runs per study, the same hosts and roles as the example
QUICK: dict[str, list[str]] = {
    "keystone": ["rdbms=[galera]", "wan.delay_ms=[50]", "runner.times=10", "runner.warmup=2",
                 "scenarios=[authenticate_user_and_validate_token]"],
    "scheduler-db": ["backends=[mariadb, galera]", "nodes=[1000]", "schedulers=[3]", "updates=[true]",
                     "repetitions=1"],
    "messaging": ["wan.delay_ms=[50]", "buses=[{kind: rabbitmq, nodes: 1, name: rabbit-central}]",
                  "cases=[{tc: tc1, clients: 30, servers: 6, rate: 100, duration_s: 5}, "
                  "{tc: tc1, label: locality, clients: 3, servers: 6, clients_in: [1], rate: 100, "
                  "duration_s: 5}]"],
    # the stand-ins for glance and neutron (named as such in each manifest's deviations)
    "nova": ["delay_ms=[25]", "schedulers=[1]", "computes.processes=2", "computes.nodes_per_process=5",
             "runner.times=10", "runner.concurrency=[5]", "image_service=fake-glance",
             "network_service=fake-neutron"],
}
JUICE = [sys.executable, "-m", "juice.cli"]
# one host's state: what is compared before/after (the check's own processes left out: its
# session, and sshd's processes for its connection)
STATE = r"""
echo '== procs'
me=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f4)  # this check's session: left out
for p in /proc/[0-9]*; do
  st=$(sed 's/.*) //' $p/stat 2>/dev/null) && c=$(cat $p/comm 2>/dev/null) || continue
  [ "$(echo "$st" | cut -d' ' -f4)" = "$me" ] || echo "${p#/proc/}:$c"
done
echo '== rules'; { iptables-save 2>/dev/null; nft list ruleset 2>/dev/null; } | grep -i juice
echo '== qdiscs'; tc qdisc show 2>/dev/null
echo '== dirs'; ls -d /var/tmp/juice* /tmp/juice* 2>/dev/null; ls -A /var/tmp/juice-host 2>/dev/null
echo '== netns'; ip netns list 2>/dev/null
true
"""
SELF = {"sshd"}  # the check's own connection (its shell's session is left out on the host)


def load_hosts(path: Path) -> tuple[list[dict[str, Any]], list[float] | None]:
    data = yaml.safe_load(path.read_text())
    true = None
    if isinstance(data, dict):
        true = data.get("true_offsets_s")
        data = data["provider"]["static"]["hosts"] if "provider" in data else data.get("hosts")
    if not isinstance(data, list) or len(data) < 3 or not all(isinstance(h, dict) and h.get("address")
                                                              for h in data):
        raise SystemExit(f"{path}: expected at least 3 hosts (address, user, key_file, port, wan_address)")
    return data, true


def ssh_argv(h: dict[str, Any], known: Path) -> list[str]:
    argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
            f"UserKnownHostsFile={known}", "-o", "LogLevel=ERROR", "-p", str(h.get("port", 22)),
            "-l", str(h.get("user", "root"))]
    if h.get("key_file"):
        argv += ["-i", os.path.expanduser(str(h["key_file"]))]
    return [*argv, str(h["address"])]


def host_state(h: dict[str, Any], known: Path) -> dict[str, list[str]]:
    cp = subprocess.run([*ssh_argv(h, known), STATE], capture_output=True, text=True, timeout=120)
    if cp.returncode != 0:
        return {"error": [cp.stderr.strip()[-300:]]}
    out: dict[str, list[str]] = {}
    cur = ""
    for line in cp.stdout.splitlines():
        if line.startswith("== "):
            cur = line[3:]
            out[cur] = []
        elif line.strip() and cur:
            out[cur].append(line.strip())
    out["procs"] = [p for p in out.get("procs", []) if p.partition(":")[2] not in SELF]
    return out


def leftovers(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: sorted(set(v) - set(before.get(k, []))) for k, v in after.items()
            if set(v) - set(before.get(k, []))}


def probe_clock(h: dict[str, Any], known: Path, samples: int = 20) -> tuple[float, float]:
    """(offset_s, bound_s) of the host's clock: its time.time() against the midpoint of the
    round trip of one line over one ssh session, the sample with the smallest RTT."""
    prog = "import sys, time\nfor _ in sys.stdin: print(repr(time.time()), flush=True)"
    p = subprocess.Popen([*ssh_argv(h, known), f"python3 -c {shlex.quote(prog)}"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdin is not None and p.stdout is not None
    best = (0.0, float("inf"))
    try:
        for _ in range(samples):
            t0 = time.time()
            p.stdin.write("\n")
            p.stdin.flush()
            there = float(p.stdout.readline())
            t1 = time.time()
            if (t1 - t0) / 2 < best[1]:
                best = (there - (t0 + t1) / 2, (t1 - t0) / 2)
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    return best


def spec_for(study: str, hosts: list[dict[str, Any]], out: Path) -> Path:
    spec = yaml.safe_load((ROOT / "examples" / EXAMPLES[study]).read_text())
    spec.setdefault("provider", {}).setdefault("static", {})["hosts"] = hosts
    path = out / f"{study}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def step(name: str, argv: list[str], log: Path, timeout: float) -> tuple[int, float]:
    print(f"\n== {name}: {' '.join(argv)}", flush=True)
    t0 = time.monotonic()
    with log.open("w") as f:
        try:
            rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    took = time.monotonic() - t0
    tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()][-6:]
    print("\n".join("   " + x for x in tail))
    print(f"   -> exit {rc} in {took:.1f} s (log {log})", flush=True)
    return rc, took


def recorded_offsets(results: Path) -> dict[str, dict[str, float]]:
    """The clock offsets the first run with a profile recorded: site -> {offset_s, rtt_s}."""
    for man in sorted(results.rglob("manifest.json")):
        try:
            offs = json.loads(man.read_text()).get("profile", {}).get("clock_offsets")
        except (OSError, ValueError, AttributeError):
            continue
        if offs:
            return {str(k): v for k, v in offs.items() if v.get("offset_s") is not None}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inventory", type=Path)
    ap.add_argument("--offline", action="store_true", help="juice hosts prepare --offline")
    ap.add_argument("--full", action="store_true", help="the examples as they are (hours), not QUICK")
    ap.add_argument("--only", default=",".join(EXAMPLES), help="studies, comma-separated")
    ap.add_argument("--skip-prepare", action="store_true", help="hosts prepared already")
    ap.add_argument("--out", type=Path,
                    default=Path("/var/tmp/juice-acceptance") / time.strftime("%Y%m%dT%H%M%S"))
    a = ap.parse_args()
    hosts, true = load_hosts(a.inventory)
    studies = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in studies if s not in EXAMPLES]
    if bad:
        ap.error(f"--only: unknown {bad}; known: {list(EXAMPLES)}")
    a.out.mkdir(parents=True, exist_ok=True)
    known = a.out / "known_hosts"
    t_all = time.monotonic()
    load0 = os.getloadavg()
    rows: list[dict[str, Any]] = []
    where = ", ".join(f"{h.get('address')}:{h.get('port', 22)}" for h in hosts)
    print(f"acceptance on {len(hosts)} hosts ({where}), "
          f"out {a.out}, load {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)

    if not a.skip_prepare:
        argv = [*JUICE, "hosts", "prepare", str(spec_for("keystone", hosts, a.out)), "--log-dir",
                str(a.out / "prepare")] + (["--offline"] if a.offline else [])
        rc, took = step("juice hosts prepare" + (" --offline" if a.offline else ""), argv,
                        a.out / "prepare.log", 4 * 3600)
        rows.append({"step": "prepare" + (" --offline" if a.offline else ""), "seconds": round(took, 1),
                     "exit": rc, "runs": "", "left": "", "load1": round(os.getloadavg()[0], 2)})
        if rc != 0:
            return report(a.out, rows, t_all, 1)

    probed = {}
    for k, h in enumerate(hosts, 1):
        off, bound = probe_clock(h, known)
        probed[str(k)] = {"offset_s": round(off, 6), "bound_s": round(bound, 6)}
    print("clocks (probe): " + ", ".join(f"host {k} {v['offset_s']:+.4f} s ± {v['bound_s'] * 1e3:.2f} ms"
                                         for k, v in probed.items()))
    base = [host_state(h, known) for h in hosts]
    worst = 0
    for study in studies:
        spec = spec_for(study, hosts, a.out)
        sets = [] if a.full else [x for s in QUICK[study] for x in ("--set", s)]
        results = a.out / study
        rc, took = step(f"{study} ({EXAMPLES[study]}{'' if a.full else ', quick'})",
                        [*JUICE, "run", str(spec), "--results", str(results), *sets],
                        a.out / f"{study}.log", 6 * 3600 if a.full else 3600)
        left = {}
        for k, (h, was) in enumerate(zip(hosts, base, strict=True), 1):
            lo = leftovers(was, host_state(h, known))
            if lo:
                left[str(k)] = lo
        runs = len([m for m in results.rglob("manifest.json") if ".warmup" not in str(m.parent)])
        rec = recorded_offsets(results)
        clocks = {k: {"recorded_s": v.get("offset_s"), "bound_s": (v.get("rtt_s") or 0) / 2,
                      "probe_s": probed.get(k, {}).get("offset_s"),
                      "true_s": true[int(k) - 1] if true and int(k) <= len(true) else None}
                  for k, v in rec.items()}
        clock_ok = all(c["true_s"] is None or abs(c["recorded_s"] - c["true_s"]) <= c["bound_s"] + 0.005
                       for c in clocks.values())
        rows.append({"step": study, "seconds": round(took, 1), "exit": rc, "runs": runs,
                     "left": json.dumps(left) if left else "nothing", "clocks": clocks, "clock_ok": clock_ok,
                     "load1": round(os.getloadavg()[0], 2), "overrides": [] if a.full else QUICK[study]})
        if rc != 0 or left or not clock_ok:
            worst = 1
    return report(a.out, rows, t_all, worst)


def report(out: Path, rows: list[dict[str, Any]], t0: float, code: int) -> int:
    total = time.monotonic() - t0
    (out / "summary.json").write_text(json.dumps({"rows": rows, "total_s": round(total, 1),
                                                  "loadavg_end": os.getloadavg()}, indent=1))
    print("\n| step | seconds | exit | runs | left on the hosts | clocks: recorded (probe, true) | load1 |")
    print("|---|---:|---:|---:|---|---|---:|")
    for r in rows:
        clocks = "; ".join(f"h{k} {c['recorded_s']:+.4f} ±{c['bound_s'] * 1e3:.1f} ms"
                           + (f" ({c['probe_s']:+.4f}" if c.get("probe_s") is not None else " (")
                           + (f", {c['true_s']:+g})" if c.get("true_s") is not None else ")")
                           for k, c in sorted(r.get("clocks", {}).items()))
        print(f"| {r['step']} | {r['seconds']} | {r['exit']} | {r['runs']} | {r['left']} | {clocks} "
              f"| {r['load1']} |")
    print(f"\ntotal {total:.0f} s; {'PASSED' if code == 0 else 'FAILED'}; summary {out / 'summary.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
