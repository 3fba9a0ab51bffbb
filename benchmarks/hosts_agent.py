"""Juice's host agent vs EnOSlib/Ansible, side by side on the same SSH hosts.

    /var/cache/juice/venv/bin/python benchmarks/hosts_agent.py     # --hosts 3 --repeat 10 --calls 5
        # --ansible both|default|pipelining --out benchmarks/results/hosts_agent.json

``--hosts`` N test hosts on this machine (``tests/testhosts.py``: each its own root filesystem
over the bare Debian 12 image with python3, its own mount and PID namespaces and sshd, in a
site namespace of a local lab, reached from here through a loopback forwarder), then
``--repeat`` R rounds; each round runs every system once, the order rotating from round to
round (A B P, B P A, P A B...):

- A, Juice's agent (``juice.hosts.session``): set-up = ssh + ship the agent + ``hello`` + a
  first ``run(["true"])``, on one host (a lone ``Session``) and on all N at once (``Hosts.open``
  + ``Hosts.each``); then ``--calls`` C times each, on host 1 and on all N at once (``each``):
  ``run`` = ``run([["true"]])``; ``file`` = ``put`` 4 KiB + ``get`` it back (two requests);
  ``spawn`` = ``spawn(["sleep", "120"])`` (pid + start time recorded); ``kill`` = ``kill([proc])``
  (SIGTERM by that pid, returns once it is gone).
- B, EnOSlib 10.9 with Ansible's defaults (ssh ControlPersist 60 s, no pipelining), P, the
  same with ``ansible_pipelining`` (``--ansible`` picks them), driven by ``hosts_enoslib.py`` in
  EnOSlib's own venv (made here when missing, as ``juice.lab.provider.install_hint()`` says):
  set-up = the first ``run_command("true")`` (fresh ssh control directory), one host and all N
  (``import enoslib`` timed apart); ``run`` = ``run_command("true")``; ``file`` = one
  ``actions`` play, ``copy`` 4 KiB + ``slurp`` it back; ``spawn`` = ``run_command`` of ``setsid
  sleep 120 & echo $! > pidfile``; ``kill`` = ``run_command("kill $(cat pidfile)")`` (does not
  wait for the end).

Every figure is wall time from here (A) or inside the helper (B, P) around one call; medians,
p10/p90 over R × C calls (set-up: over R), the ratios B/A and P/A, the 1-min load average
while measured. Writes everything as JSON; everything made (lab, sshd's, forwarders, agents,
ssh masters, temp dirs) is removed on success, failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT):  # juice, and tests.testhosts (the test hosts)
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from tests import testhosts  # noqa: E402

from juice.hosts.agent import BASE  # noqa: E402
from juice.hosts.session import Hosts, Proc, Session  # noqa: E402
from juice.lab.provider import ENOSLIB_REQ, ENOSLIB_VERSION, StaticHost, enoslib_python  # noqa: E402
from juice.paths import cache_dir  # noqa: E402

HELPER = Path(__file__).with_name("hosts_enoslib.py")
PAYLOAD = "x" * 4095 + "\n"  # 4 KiB, as in hosts_enoslib.py
OPS = ("setup", "run", "file", "spawn", "kill")
SYSTEMS = {"A": "Juice agent", "B": "EnOSlib (Ansible defaults)", "P": "EnOSlib + pipelining"}
LAB = "bench-agent"


def say(msg: str) -> None:
    print(msg, flush=True)


def load1() -> float:
    return os.getloadavg()[0]


# ---- EnOSlib's venv ----------------------------------------------------------------------------
def enoslib_version(py: Path) -> str | None:
    """EnOSlib's installed version for ``py`` (metadata only: importing Ansible writes ~/.ansible)."""
    code = "import importlib.metadata as m; print(m.version('enoslib'))"
    try:
        cp = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cp.stdout.strip() if cp.returncode == 0 and cp.stdout.strip() else None


def ensure_enoslib() -> tuple[Path, str, float | None]:
    """EnOSlib's Python, made as ``provider.install_hint()`` says when missing: (python,
    version, seconds it took to make the venv or None when it was there)."""
    py = enoslib_python()
    version = enoslib_version(py) if py.exists() else None
    if version is not None:
        say(f"EnOSlib {version}: {py}")
        return py, version, None
    if os.environ.get("JUICE_ENOSLIB_PYTHON"):
        sys.exit(f"JUICE_ENOSLIB_PYTHON={py} has no EnOSlib")
    venv = cache_dir() / "enoslib"
    steps = [["python3", "-m", "venv", str(venv)], [str(venv / "bin" / "pip"), "install", ENOSLIB_REQ]]
    say(f"EnOSlib {ENOSLIB_VERSION} missing at {py}: making its venv (juice.lab.provider.install_hint())")
    t0 = time.monotonic()
    for argv in steps:
        say("  $ " + " ".join(argv))
        t1 = time.monotonic()
        subprocess.run(argv, check=True, timeout=1800, stdout=subprocess.DEVNULL)
        say(f"    {time.monotonic() - t1:.1f} s")
    took = time.monotonic() - t0
    version = enoslib_version(py)
    if version is None:
        sys.exit(f"EnOSlib is still missing for {py}")
    say(f"EnOSlib {version}: venv made in {took:.1f} s")
    return py, version, took


# ---- A: Juice's agent --------------------------------------------------------------------------
def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _quiet(_: str) -> None:
    pass


def _file(s: Session) -> None:
    s.put("bench/f.txt", PAYLOAD)
    if s.get("bench/f.txt") != PAYLOAD.encode():
        raise RuntimeError(f"{s.name}: the file read back differs")


def _spawn(procs: dict[int, Proc], k: int, s: Session) -> None:
    procs[k] = s.spawn(["sleep", "120"], log="bench/sleep.log")


def _kill(procs: dict[int, Proc], k: int, s: Session) -> None:
    s.kill([procs[k]], grace_s=10)


def agent_round(specs: Sequence[StaticHost], work: Path, calls: int) -> dict[str, Any]:
    out: dict[str, Any] = {"setup": {}, "ops": {}, "load": {}}
    work.mkdir(parents=True)

    def add(op: str, scope: str, dt: float) -> None:
        out["ops"].setdefault(op, {}).setdefault(scope, []).append(dt)

    one = Session(1, specs[0], LAB, work)
    try:
        out["setup"]["1"] = _timed(lambda: (one.open(), one.run([["true"]])))
    finally:
        one.close()
    hosts = Hosts(LAB, {k: h for k, h in enumerate(specs, 1)}, work)
    try:
        def connect() -> None:
            hosts.open(_quiet)
            hosts.each("run", lambda _k, s: s.run([["true"]]))

        out["setup"]["all"] = _timed(connect)
        first = hosts[1]
        steps: dict[str, dict[str, Callable[[], object]]] = {
            "run": {"1": lambda: first.run([["true"]]),
                    "all": lambda: hosts.each("run", lambda _k, s: s.run([["true"]]))},
            "file": {"1": lambda: _file(first), "all": lambda: hosts.each("file", lambda _k, s: _file(s))},
        }
        for op, scopes in steps.items():
            for scope, fn in scopes.items():
                out["load"].setdefault(op, []).append(load1())
                for _ in range(calls):
                    add(op, scope, _timed(fn))
        for scope in ("1", "all"):
            for op in ("spawn", "kill"):
                out["load"].setdefault(op, []).append(load1())
            sites = [1] if scope == "1" else sorted(hosts.sessions)
            for _ in range(calls):
                procs: dict[int, Proc] = {}
                spawn, kill = partial(_spawn, procs), partial(_kill, procs)
                if scope == "1":
                    add("spawn", scope, _timed(partial(spawn, 1, first)))
                    add("kill", scope, _timed(partial(kill, 1, first)))
                else:
                    add("spawn", scope, _timed(partial(hosts.each, "spawn", spawn, sites)))
                    add("kill", scope, _timed(partial(hosts.each, "kill", kill, sites)))
    finally:
        hosts.close()  # bye: each agent stops what it started and removes its directory
    return out


# ---- B, P: EnOSlib -----------------------------------------------------------------------------
def enoslib_env(tmp: Path) -> dict[str, str]:
    """The helper's environment: Ansible's own files under ``tmp``, no ssh agent, not Juice's path."""
    home = tmp / "ansible-home"
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "PYTHONPATH")}
    env.update(ANSIBLE_HOME=str(home), ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1")
    return env


def close_masters(cp: Path) -> None:
    """End any ssh ControlPersist master left under ``cp`` (a failed or interrupted helper)."""
    if not cp.is_dir():
        return
    for sock in cp.rglob("*"):
        try:
            if stat.S_ISSOCK(sock.lstat().st_mode):
                subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={sock}", "x"],
                               capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass


def enoslib_round(py: Path, specs: Sequence[StaticHost], work: Path, tmp: Path, calls: int,
                  pipelining: bool) -> dict[str, Any]:
    work.mkdir(parents=True)
    req = {"hosts": [{"alias": f"site-{k}", "address": h.address, "port": h.port, "user": h.user,
                      "key": h.key_file} for k, h in enumerate(specs, 1)],
           "calls": calls, "python": "/usr/bin/python3", "remote_dir": f"{BASE}/bench-ansible",
           "remote_tmp": f"{BASE}/ansible-tmp", "known_hosts": str(work / "known_hosts"),
           "cp_dir": str(tmp / "cp" / work.name), "pipelining": pipelining, "forks": max(5, len(specs))}
    (work / "request.json").write_text(json.dumps(req))
    log = work / "helper.log"
    argv = [str(py), str(HELPER), str(work / "request.json"), str(work / "result.json")]
    try:
        with log.open("wb") as f:
            rc = subprocess.run(argv, cwd=work, env=enoslib_env(tmp), stdin=subprocess.DEVNULL,
                                stdout=f, stderr=subprocess.STDOUT, timeout=300 + 60 * calls * 8,
                                check=False).returncode
    finally:
        close_masters(tmp / "cp" / work.name)
    if rc != 0:  # the log goes with the temp dir: its tail is shown here
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip() and set(x) != {"─"}]
        raise RuntimeError(f"hosts_enoslib.py exit {rc}; its output ends:\n" + "\n".join(lines[-25:]))
    res: dict[str, Any] = json.loads((work / "result.json").read_text())
    return res


# ---- figures -----------------------------------------------------------------------------------
def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    i = (len(s) - 1) * q
    lo = int(i)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def stats(xs: Sequence[float]) -> dict[str, float] | None:
    if not xs:
        return None
    return {"n": len(xs), "median_ms": pct(xs, 0.5) * 1e3, "p10_ms": pct(xs, 0.1) * 1e3,
            "p90_ms": pct(xs, 0.9) * 1e3}


def summarize(rounds: list[dict[str, Any]], systems: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for op in OPS:
        for scope in ("1", "all"):
            row: dict[str, Any] = {"op": op, "scope": scope}
            loads: list[float] = []
            for sysname in systems:
                xs: list[float] = []
                for r in rounds:
                    res = r["systems"].get(sysname)
                    if res is None:
                        continue
                    if op == "setup":
                        xs.append(res["setup"][scope])
                        loads.append(r["load"][sysname])
                    else:
                        xs += res["ops"][op][scope]
                        loads += res["load"][op]
                row[sysname] = stats(xs)
            a = row.get("A")
            for sysname in systems:
                v = row.get(sysname)
                if sysname != "A" and a and v:
                    row[f"{sysname}/A"] = v["median_ms"] / a["median_ms"]
            row["load"] = [min(loads), max(loads)] if loads else None
            rows.append(row)
    return rows


def fmt_ms(v: dict[str, float] | None) -> str:
    if v is None:
        return "-"

    def f(x: float) -> str:
        return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    return f"{f(v['median_ms'])} ({f(v['p10_ms'])}–{f(v['p90_ms'])})"


def table(rows: list[dict[str, Any]], systems: Sequence[str], n: int) -> str:
    head = ["operation", "hosts", *(f"{SYSTEMS[s]}, ms" for s in systems),
            *(f"{s}/A" for s in systems if s != "A"), "load avg (1 min)"]
    out = ["| " + " | ".join(head) + " |", "|---|---:|" + "---:|" * (len(head) - 3) + "---|"]
    for r in rows:
        ratios = [f"{r[f'{s}/A']:.0f}×" if r.get(f"{s}/A") is not None else "-" for s in systems if s != "A"]
        load = f"{r['load'][0]:.2f}–{r['load'][1]:.2f}" if r["load"] else "-"
        out.append("| " + " | ".join([r["op"], "1" if r["scope"] == "1" else f"all {n}",
                                      *(fmt_ms(r.get(s)) for s in systems), *ratios, load]) + " |")
    return "\n".join(out)


# ---- main --------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=3, help="SSH test hosts (default 3)")
    ap.add_argument("--repeat", type=int, default=10, help="rounds, each system once per round (default 10)")
    ap.add_argument("--calls", type=int, default=5,
                    help="calls of each operation per round and scope (default 5)")
    ap.add_argument("--ansible", choices=("both", "default", "pipelining"), default="both",
                    help="EnOSlib with Ansible's defaults (B), with ssh pipelining (P), or both (default)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hosts_agent.json")
    a = ap.parse_args()
    if not 1 <= a.hosts <= 16 or not 1 <= a.repeat <= 200 or not 1 <= a.calls <= 100:
        ap.error("--hosts 1..16, --repeat 1..200, --calls 1..100")
    if testhosts.available() is not None:
        sys.exit(f"test hosts: {testhosts.available()}")
    # SIGTERM unwinds like Ctrl-C: the lab, sshd's, forwarders, agents and temp dirs go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    py, version, venv_s = ensure_enoslib()
    systems = ["A"] + {"both": ["B", "P"], "default": ["B"], "pipelining": ["P"]}[a.ansible]
    tmp = Path(tempfile.mkdtemp(prefix="juice-bench-hosts-", dir="/var/tmp"))
    rounds: list[dict[str, Any]] = []
    t_start = time.monotonic()
    load_before = os.getloadavg()
    try:
        t0 = time.monotonic()
        with testhosts.test_hosts(a.hosts, tmp / "hosts") as (_lab, specs):
            say(f"{a.hosts} SSH test hosts up in {time.monotonic() - t0:.1f} s "
                f"(ports {', '.join(str(h.port) for h in specs)})")
            for r in range(a.repeat):
                order = systems[r % len(systems):] + systems[:r % len(systems)]
                rnd: dict[str, Any] = {"round": r + 1, "order": order, "systems": {}, "load": {}}
                for s in order:
                    rnd["load"][s] = load1()
                    work = tmp / f"r{r + 1}-{s}"
                    res = (agent_round(specs, work, a.calls) if s == "A"
                           else enoslib_round(py, specs, work, tmp, a.calls, pipelining=s == "P"))
                    rnd["systems"][s] = res
                    run1 = stats(res["ops"]["run"]["1"])
                    say(f"round {r + 1}/{a.repeat} {s} ({SYSTEMS[s]}), load {rnd['load'][s]:.2f}: "
                        f"set-up {res['setup']['1'] * 1e3:.0f} ms (1 host), "
                        f"{res['setup']['all'] * 1e3:.0f} ms (all {a.hosts}); "
                        f"run on 1 host median {run1['median_ms'] if run1 else 0:.1f} ms"
                        + (f"; import enoslib {res['import_s']:.2f} s" if "import_s" in res else ""))
                rounds.append(rnd)
    finally:
        close_masters(tmp / "cp")
        shutil.rmtree(tmp, ignore_errors=True)
    rows = summarize(rounds, systems)
    imports = [r["systems"][s]["import_s"] for r in rounds for s in systems if s != "A"]
    first: dict[str, Any] = next((r["systems"][s] for r in rounds for s in systems if s != "A"), {})
    doc = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(), "kernel": platform.release(),
        "nproc": os.cpu_count(), "hosts": a.hosts, "repeat": a.repeat, "calls": a.calls, "systems": systems,
        "enoslib": version, "ansible": first.get("ansible"), "enoslib_python": str(py),
        "enoslib_venv_made_s": venv_s, "import_enoslib": stats(imports),
        "load_before": load_before, "load_after": os.getloadavg(), "wall_s": time.monotonic() - t_start,
        "summary": rows, "rounds": rounds,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1))
    say("")
    say(f"{a.hosts} hosts, {a.repeat} rounds × {a.calls} calls; EnOSlib {version}, ansible-core "
        f"{doc['ansible']}; load average before {load_before[0]:.2f}, after {doc['load_after'][0]:.2f}; "
        f"{doc['wall_s']:.0f} s")
    if venv_s is not None:
        say(f"EnOSlib's venv was made by this run: {venv_s:.1f} s")
    imp = doc["import_enoslib"]
    if imp:
        say(f"import enoslib (once per EnOSlib process, not in the table): "
            f"median {imp['median_ms'] / 1e3:.2f} s")
    say("")
    say(table(rows, systems, a.hosts))
    say(f"\n(median (p10–p90); set-up: n = {a.repeat}, operations: n = {a.repeat * a.calls}) -> {a.out}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted (lab, hosts, agents and temp dirs removed)")
