"""A scheduler, updater or admin process, started in a lab site (``lab.popen``: the site's
namespace here, its host over ssh) by the study and driven over stdin/stdout, one JSON object
per line (``WorkerProc`` is the study's side). Every connection to the store is made by a
worker at its site, so the study runs the same in a local lab and on hosts.

    python -m juice.studies.schedulerdb.worker
    > {"role": "reader"|"updater"|"admin", "endpoint": {...}, "timeout_s": 600}   (first line)
    < {"ok": true, "pid": ...}                                          (connected)
    admin:   > {"cmd": "exec", "statements": [...]}   < {"ok": true}     (DDL, one connection)
             > {"cmd": "grow", "family", "seed", "k", "have", "want", "analyze"}
             < {"ok": true, "written"}                                  (populate, see populate.py)
             > {"cmd": "flush"}  < {"ok": true}                         (a cache emptied)
    reader:  > {"cmd": "read", "track", "nodes", "candidates", "seed", "rep"}
             < {"ok", "seconds", "fetch_s", "hydrate_s", "rows", "objects", "error", "t_start"}
    updater: > {"cmd": "start", "family", "nodes", "rate", "seed", "k", "workers", "part", "parts"}
             < {"ok": true}
             > {"cmd": "stop"}     < {"ok": true, "count", "achieved_rate", ...}
    both:    > {"cmd": "quit"}  (or EOF) → exit 0

Each process holds its own connection(s), like a real scheduler (one process = one
scheduler, so CPU contention between schedulers is real, not GIL contention).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from juice.errors import ServiceError
from juice.lab.place import Lab


def _reply(obj: Mapping[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    from juice.studies.schedulerdb import dbapi, readers
    from juice.studies.schedulerdb.updates import OpenLoopUpdater

    first = sys.stdin.readline()
    if not first:
        return 0
    cfg = json.loads(first)
    ep, role = cfg["endpoint"], cfg["role"]
    timeout = float(cfg.get("timeout_s", 600))
    driver = ep["driver"]
    try:
        conn = dbapi.connect(ep, timeout=timeout) if role in ("reader", "admin") else None
    except Exception as e:
        _reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    _reply({"ok": True, "pid": os.getpid()})
    updater: OpenLoopUpdater | None = None
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.get("cmd")
        if cmd == "quit":
            break
        if cmd == "read":
            t_start = time.time()
            try:
                r = readers.read(conn, driver, msg["track"], int(msg["nodes"]), int(msg["candidates"]),
                                 int(msg["seed"]), int(msg["rep"]))
                _reply({"ok": True, "seconds": r.seconds, "fetch_s": r.fetch_s, "hydrate_s": r.hydrate_s,
                        "rows": r.rows, "objects": r.objects, "error": "", "t_start": t_start})
            except Exception as e:
                _reply({"ok": False, "seconds": time.time() - t_start, "fetch_s": None, "hydrate_s": None,
                        "rows": 0, "objects": 0, "error": f"{type(e).__name__}: {e}"[:300],
                        "t_start": t_start})
                try:  # a fresh connection for the next read
                    conn = dbapi.connect(ep, timeout=timeout)
                except Exception:
                    pass
        elif cmd == "start":
            try:
                updater = OpenLoopUpdater(lambda: dbapi.connect(ep, timeout=timeout), driver, msg["family"],
                                          nodes=int(msg["nodes"]), rate=float(msg["rate"]),
                                          seed=int(msg["seed"]), k=int(msg["k"]),
                                          workers=int(msg["workers"]), part=int(msg["part"]),
                                          parts=int(msg["parts"]))
                updater.start()
                _reply({"ok": True})
            except Exception as e:
                _reply({"ok": False, "error": f"{type(e).__name__}: {e}"[:300]})
        elif cmd in ("exec", "grow", "flush"):
            try:
                _reply({"ok": True, **_admin(conn, driver, msg)})
            except Exception as e:
                _reply({"ok": False, "error": f"{type(e).__name__}: {e}"[:300]})
        elif cmd == "stop":
            rep = updater.stop() if updater else {"count": 0, "elapsed_s": 0.0, "achieved_rate": 0.0}
            updater = None
            _reply({"ok": True, **rep})
        else:
            _reply({"ok": False, "error": f"unknown command {cmd!r}"})
    return 0


def _admin(conn: Any, driver: str, msg: dict[str, Any]) -> dict[str, Any]:
    """One admin command on the admin worker's connection."""
    from juice.studies.schedulerdb import dbapi, populate

    if msg["cmd"] == "exec":
        for stmt in msg["statements"]:
            dbapi.execute(conn, stmt)
        return {}
    if msg["cmd"] == "flush":
        conn.flush_all() if driver == "memcached" else conn.flushall()
        return {}
    written = populate.grow(msg["family"], conn, driver, int(msg["seed"]), int(msg["k"]),
                            int(msg["have"]), int(msg["want"]))
    if msg.get("analyze"):
        dbapi.execute(conn, "ANALYZE")
    return {"written": written}


class WorkerProc:
    """The study's handle on one worker process in ``site`` of ``lab`` (bounded waits on every
    reply; its stderr goes to ``log``)."""

    def __init__(self, lab: Lab, site: int, cfg: dict[str, Any], log: IO[bytes],
                 timeout: float = 60.0) -> None:
        argv = [sys.executable, "-m", "juice.studies.schedulerdb.worker"]
        self.p = lab.popen(site, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                           env=dict(os.environ))
        self.buf = b""
        self.send(cfg)
        hello = self.recv(timeout)
        if not hello.get("ok"):
            self.close()
            raise ServiceError(f"scheduler-db worker could not connect: {hello.get('error')}")
        self.pid = int(hello["pid"])

    def send(self, obj: Mapping[str, object]) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def recv(self, timeout: float) -> dict[str, Any]:
        assert self.p.stdout is not None
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServiceError(f"scheduler-db worker {self.p.pid}: no answer within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise ServiceError(f"scheduler-db worker {self.p.pid} exited "
                                       f"(code {self.p.poll()}); see its log")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        out: dict[str, Any] = json.loads(line)
        return out

    def call(self, msg: dict[str, object], timeout: float) -> dict[str, object]:
        """Send one command and wait (bounded) for its reply; ServiceError when it failed."""
        self.send(msg)
        got = self.recv(timeout)
        if not got.get("ok"):
            raise ServiceError(f"scheduler-db worker {msg.get('cmd')}: {got.get('error')}")
        return got

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
            if self.p.stdin:
                self.p.stdin.close()
            self.p.wait(timeout=10)
        except Exception:
            self.p.kill()
            self.p.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
