"""EnOSlib's side of ``hosts_agent.py``: one round of timed calls, in EnOSlib's own interpreter.

Not imported by Juice or by the benchmark: ``hosts_agent.py`` runs it with the Python of
EnOSlib's venv (EnOSlib 10.9 pins rich~=12, Juice rich 13), as Juice runs
``src/juice/lab/enoslib_helper.py``. Standard library + EnOSlib only::

    <enoslib-python> hosts_enoslib.py REQUEST.json RESULT.json

REQUEST: ``{"hosts": [{"alias", "address", "port", "user", "key"}, ...], "calls": C,
"python": "/usr/bin/python3", "remote_dir": DIR, "remote_tmp": DIR, "known_hosts": FILE,
"cp_dir": DIR, "pipelining": bool, "forks": F}``. The environment sets Ansible's own
directories (ANSIBLE_HOME, ANSIBLE_LOCAL_TEMP) and ANSIBLE_HOST_KEY_CHECKING=False.

RESULT: ``{"enoslib", "ansible", "import_s", "setup": {"1": s, "all": s}, "ops": {op: {"1":
[s, ...], "all": [s, ...]}}, "load": {op: [1-min load average, ...]}}``, every time measured
here around the EnOSlib call (wall clock, ``time.perf_counter``). Exit 0 on success, 1 on a
failure (the reason on stderr, last line).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any

# this file's directory is sys.path[0]: the benchmarks' modules must not shadow EnOSlib's
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

PAYLOAD = "x" * 4095 + "\n"  # the file written and read back (4 KiB), as on the agent side


def hosts(en: Any, req: dict[str, Any], cp: str) -> list[Any]:
    """EnOSlib Hosts for the test hosts, their ssh masters under ``cp`` (a fresh directory =
    fresh connections: what a first call costs)."""
    ssh_args = f"-o UserKnownHostsFile={req['known_hosts']} -o StrictHostKeyChecking=no"
    extra = {"ansible_python_interpreter": req["python"], "ansible_remote_tmp": req["remote_tmp"],
             "ansible_ssh_common_args": ssh_args, "ansible_control_path_dir": cp,
             "ansible_pipelining": bool(req["pipelining"])}
    return [en.Host(h["address"], alias=h["alias"], user=h["user"], keyfile=h["key"], port=h["port"],
                    extra=dict(extra)) for h in req["hosts"]]


def timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def close_masters(cp_dirs: list[str]) -> None:
    """End the ssh ControlPersist masters Ansible left (they would linger 60 s)."""
    for d in cp_dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            subprocess.run(["ssh", "-O", "exit", "-o", f"ControlPath={os.path.join(d, name)}", "x"],
                           capture_output=True, timeout=10, check=False)


def round_(en: Any, req: dict[str, Any], out: dict[str, Any]) -> None:
    en.set_config(ansible_forks=int(req["forks"]))
    d, calls = req["remote_dir"], int(req["calls"])
    pidfile = f"{d}/sleep.pid"
    cp1, cpn = os.path.join(req["cp_dir"], "one"), os.path.join(req["cp_dir"], "all")
    out["setup"]["1"] = timed(lambda: en.run_command("true", roles=en.Roles({"h": hosts(en, req, cp1)[:1]})))
    every = hosts(en, req, cpn)
    roles = {"1": en.Roles({"h": every[:1]}), "all": en.Roles({"h": every})}
    out["setup"]["all"] = timed(lambda: en.run_command("true", roles=roles["all"]))
    en.run_command(f"mkdir -p {d}", roles=roles["all"])  # untimed: copy needs the directory

    def file(r: Any) -> None:
        with en.actions(roles=r) as a:
            a.copy(content=PAYLOAD, dest=f"{d}/f.txt", mode="0644")
            a.slurp(src=f"{d}/f.txt")

    ops = {
        "run": lambda r: en.run_command("true", roles=r),
        "file": file,
        # a sleeping process in a session of its own, its pid recorded on the host; then killed by it
        "spawn": lambda r: en.run_command(
            f"setsid sleep 120 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}", roles=r),
        "kill": lambda r: en.run_command(f"kill $(cat {pidfile})", roles=r),
    }
    for op in ("run", "file"):
        for scope in ("1", "all"):
            out["load"].setdefault(op, []).append(os.getloadavg()[0])
            out["ops"].setdefault(op, {}).setdefault(scope, []).extend(
                timed(ops[op], roles[scope]) for _ in range(calls))
    for scope in ("1", "all"):
        for op in ("spawn", "kill"):
            out["load"].setdefault(op, []).append(os.getloadavg()[0])
        for _ in range(calls):
            for op in ("spawn", "kill"):
                dt = timed(ops[op], roles[scope])
                out["ops"].setdefault(op, {}).setdefault(scope, []).append(dt)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: hosts_enoslib.py REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        req = json.load(f)
    out: dict[str, Any] = {"setup": {}, "ops": {}, "load": {}}
    cp_dirs = [os.path.join(req["cp_dir"], x) for x in ("one", "all")]
    en: Any = None
    done = False
    try:
        t0 = time.perf_counter()
        ansible = importlib.import_module("ansible")
        en = importlib.import_module("enoslib")

        out.update(import_s=time.perf_counter() - t0, enoslib=str(en.__version__).strip(),
                   ansible=str(ansible.__version__))
        round_(en, req, out)
        done = True
    except Exception as e:
        print(f"hosts_enoslib: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    finally:
        if en is not None and not done:  # a sleeping process left by a failed round (best effort)
            try:
                everyone = en.Roles({"h": hosts(en, req, cp_dirs[1])})
                en.run_command(f"kill $(cat {req['remote_dir']}/sleep.pid) 2>/dev/null; true",
                               roles=everyone, on_error_continue=True)
            except Exception:
                pass
        close_masters(cp_dirs)
    with open(argv[1], "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
