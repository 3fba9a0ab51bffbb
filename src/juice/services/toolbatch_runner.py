"""Runs several commands of one OpenStack management tool with ONE import of the tool.

Shipped to the place (a site's namespace or an SSH host) and run there by the OpenStack venv's
python: ``python toolbatch_runner.py BATCH.json``. Standard library only. The batch file::

    {"entry": "keystone.cmd.manage:main",
     "groups": [[{"what": "db_sync", "argv": ["keystone-manage", "--config-file", "c", "db_sync"],
                  "log": "/path/manage-db_sync.log", "env": {}, "timeout_s": 600}, ...], ...]}

The parent imports the entry's module once (what costs the CPU: ~2 s for keystone or nova),
then, group after group, forks one child per command of the group (the commands of a group run
at once); each child gets a fresh interpreter state exactly as a new ``keystone-manage`` process
would have — the tool has parsed no configuration before the fork, only imported its code —
sets its environment and ``sys.argv``, sends its output to its log (appended, after a
``--- <what>`` line) and calls the entry, whose return value is the exit code (as the console
script does). Children die with the parent (PR_SET_PDEATHSIG). A command past its own timeout is
killed. The parent prints a JSON line for the import, then one per finished command (``what``,
``rc``, ``s``), and stops after the first group with a failure (exit 1); exit 0 when every
command succeeded.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (annotations only: this file runs on the OpenStack venv's python)
    from collections.abc import Callable
    from typing import TypedDict

    class _StepBase(TypedDict):
        what: str
        argv: list[str]
        log: str

    class Step(_StepBase, total=False):
        """One command of a batch."""

        env: dict[str, str]
        timeout_s: float

    class Done(TypedDict):
        """What the parent prints per finished command."""

        what: str
        rc: int
        s: float

PR_SET_PDEATHSIG = 1


def _child(step: Step, entry: Callable[[], object]) -> None:
    """In the forked child: never returns."""
    code = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        fd = os.open(step["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(fd, f"--- {step['what']}\n".encode())
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.environ.update(step.get("env") or {})
        sys.argv = list(step["argv"])
        rc = entry()
        code = rc if isinstance(rc, int) else (0 if rc is None else 1)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:
        print(f"toolbatch: {type(e).__name__}: {e}", file=sys.stderr)
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _wait(running: dict[int, tuple[Step, float]]) -> list[Done]:
    """Wait for every child of a group (each bounded by its own timeout)."""
    done: list[Done] = []
    while running:
        now = time.monotonic()
        for pid, (step, t0) in list(running.items()):
            if now - t0 > float(step.get("timeout_s", 600)):
                os.kill(pid, signal.SIGKILL)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            continue
        if pid not in running:
            continue
        step, t0 = running.pop(pid)
        rc = os.waitstatus_to_exitcode(status)
        done.append({"what": step["what"], "rc": rc, "s": round(time.monotonic() - t0, 3)})
        print(json.dumps(done[-1]), flush=True)
    return done


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        batch = json.load(f)
    module, _, attr = str(batch["entry"]).partition(":")
    t0 = time.monotonic()
    entry = getattr(importlib.import_module(module), attr or "main")
    print(json.dumps({"what": "import", "rc": 0, "s": round(time.monotonic() - t0, 3)}), flush=True)
    gc.freeze()  # the imported code's pages stay shared with the children
    for group in batch["groups"]:
        running: dict[int, tuple[Step, float]] = {}
        for step in group:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(step, entry)
            running[pid] = (step, time.monotonic())
        if any(r["rc"] != 0 for r in _wait(running)):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
