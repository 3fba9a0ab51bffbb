"""The host agent: what Juice runs on each SSH host, shipped as source over ``ssh`` stdin.

Standard library only (any python3 >= 3.7 on the host; Juice itself need not be installed
there). It reads one JSON request per line on stdin and answers one JSON line on stdout, in the
order they finish (each request runs in its own thread: a probe is not held up by a tool
running for a minute; requests that change the agent's state take turns on one lock)::

    {"id": 3, "op": "spawn", "argv": [...], "log": "s2/mariadb/out.log"}
    {"id": 3, "ok": true, "pid": 4711, "start": 123456}

Everything it creates lives under its ROOT directory (``/var/tmp/juice-host/<lab>``): file
paths are relative to it, and a path that leaves it is refused. Processes it starts are
recorded with their pid and kernel start time, and stopped by that pid (never by name).
``undo`` commands (tc / iptables teardown) registered by Juice run in reverse order at the end.

The end comes with ``{"op": "bye"}``, or when stdin closes (Juice exited or crashed, ssh
dropped): recorded processes are stopped, undo commands run, ROOT removed. The state is kept
in ``ROOT/agent.json``, so the next agent started on that host cleans up after an agent that
was itself killed (``sweep`` at start).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any

BASE = "/var/tmp/juice-host"
MAX_OUT = 64 * 1024  # bytes of a command's stdout/stderr sent back (the tail)
MAX_GET = 64 * 1024 * 1024
MAX_INFLIGHT = 64  # requests answered at once; reading waits beyond that
# the operations that change the agent's state (its records and ROOT/agent.json): one at a time
STATEFUL = frozenset({"hello", "spawn", "adopt", "undo", "run_undo", "listen"})


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (guards against pid reuse)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int, start: int | None) -> bool:
    """Running (a zombie is not: it has exited and waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
        now, state = int(fields[19]), fields[0]
    except (OSError, IndexError, ValueError):
        return False
    return state != "Z" and (start is None or now == start)


def kill_all(procs: list[list[int | None]], sig: int, grace_s: float) -> list[int]:
    """``sig`` to each (pid, start) still alive, wait up to ``grace_s``, then SIGKILL."""
    live = [(int(p), s) for p, s in procs if p is not None and alive(int(p), s)]
    for pid, _ in live:
        try:
            os.killpg(pid, sig) if _is_leader(pid) else os.kill(pid, sig)
        except OSError:
            pass
    _wait_gone(live, grace_s)
    for pid, s in live:
        if alive(pid, s):
            try:
                os.killpg(pid, signal.SIGKILL) if _is_leader(pid) else os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    _wait_gone(live, 10.0)
    return [p for p, _ in live]


def _wait_gone(live: list[tuple[int, int | None]], limit_s: float) -> None:
    """Until none of ``live`` runs (bounded): polls at 1 ms doubling to 50 ms, so a process that
    exits at once on its signal is seen gone in about a millisecond."""
    deadline, pause = time.monotonic() + limit_s, 0.001
    while time.monotonic() < deadline and any(alive(p, s) for p, s in live):
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _is_leader(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _tail(b: bytes) -> str:
    return b[-MAX_OUT:].decode(errors="replace")


class Agent:
    def __init__(self, lab: str) -> None:
        if not lab or "/" in lab or lab.startswith("."):
            raise ValueError(f"bad lab name {lab!r}")
        self.root = os.path.join(BASE, lab)
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        self.listeners: list[socket.socket] = []
        self.state: dict[str, Any] = {"agent": [os.getpid(), start_time(os.getpid())],
                                      "procs": [], "undo": []}
        self.lock = threading.RLock()  # around every change of state/children/listeners

    # ---- state ---------------------------------------------------------------------------
    def save(self) -> None:
        tmp = os.path.join(self.root, ".agent.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, os.path.join(self.root, "agent.json"))

    def path(self, rel: str) -> str:
        p = os.path.normpath(os.path.join(self.root, rel))
        if p != self.root and not p.startswith(self.root + "/"):
            raise ValueError(f"path {rel!r} leaves the lab directory {self.root}")
        return p

    # ---- operations ----------------------------------------------------------------------
    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        swept = sweep(exclude=self.root)
        os.makedirs(self.root, mode=0o755, exist_ok=True)
        self.save()
        u = os.uname()
        return {"root": self.root, "python": sys.version.split()[0], "hostname": u.nodename,
                "kernel": u.release, "uid": os.getuid(), "time": time.time(), "swept": swept,
                "nproc": os.cpu_count()}

    def op_ping(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"time": time.time()}

    def op_exec(self, req: dict[str, Any]) -> dict[str, Any]:
        """Commands one after another (stop at the first failure unless ``keep_going``)."""
        out = []
        for cmd in req["cmds"]:
            t0 = time.monotonic()
            try:
                cp = subprocess.run(cmd["argv"], input=(cmd.get("input") or "").encode(),
                                    capture_output=True, timeout=float(cmd.get("timeout", 60)),
                                    env=self._env(cmd), cwd=self._cwd(cmd))
                res = {"rc": cp.returncode, "out": _tail(cp.stdout), "err": _tail(cp.stderr)}
            except subprocess.TimeoutExpired as e:
                res = {"rc": None, "out": _tail(e.stdout or b""),
                       "err": f"timed out after {cmd.get('timeout', 60)} s"}
            except OSError as e:
                res = {"rc": None, "out": "", "err": f"{type(e).__name__}: {e}"}
            res["s"] = round(time.monotonic() - t0, 4)
            out.append(res)
            if res["rc"] != 0 and not req.get("keep_going"):
                break
        return {"results": out}

    def _env(self, req: dict[str, Any]) -> dict[str, str] | None:
        env = req.get("env")
        if env is None:
            return None
        base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        return {**base, **{str(k): str(v) for k, v in env.items()}}

    def _cwd(self, req: dict[str, Any]) -> str | None:
        return self.path(req["cwd"]) if req.get("cwd") else None

    def op_spawn(self, req: dict[str, Any]) -> dict[str, Any]:
        """A server in its own session, output appended to ``log`` (under ROOT); recorded."""
        log = self.path(req["log"])
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "ab") as f:
            child = subprocess.Popen(req["argv"], stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                                     env=self._env(req), cwd=self._cwd(req), start_new_session=True)
        self.children[child.pid] = child
        st = start_time(child.pid)
        self.state["procs"].append([child.pid, st])
        self.save()
        return {"pid": child.pid, "start": st}

    def op_adopt(self, req: dict[str, Any]) -> dict[str, Any]:
        """Record a process started otherwise (a daemon that forked) so it is stopped at the end."""
        pid = int(req["pid"])
        st = start_time(pid)
        if st is None:
            raise ValueError(f"no process {pid}")
        self.state["procs"].append([pid, st])
        self.save()
        return {"pid": pid, "start": st}

    def op_status(self, req: dict[str, Any]) -> dict[str, Any]:
        res = {}
        for pid, st in req["procs"]:
            with self.lock:
                child = self.children.get(int(pid))
            code = child.poll() if child is not None else None
            res[str(pid)] = {"alive": code is None and alive(int(pid), st), "code": code}
        return {"procs": res}

    def op_kill(self, req: dict[str, Any]) -> dict[str, Any]:
        procs = req["procs"]
        # the wait for the processes to go is outside the lock: other requests go on meanwhile
        done = kill_all(procs, int(req.get("sig", signal.SIGTERM)), float(req.get("grace_s", 30)))
        with self.lock:
            for pid, _ in procs:
                child = self.children.pop(int(pid), None)
                if child is not None:
                    child.poll()
            keep = {int(p) for p, _ in procs}
            self.state["procs"] = [x for x in self.state["procs"] if int(x[0]) not in keep]
            self.save()
        return {"killed": done}

    def op_undo(self, req: dict[str, Any]) -> dict[str, Any]:
        """Register teardown commands (run at the end, last registered first)."""
        self.state["undo"].append(req["argv"])
        self.save()
        return {"n": len(self.state["undo"])}

    def op_run_undo(self, req: dict[str, Any]) -> dict[str, Any]:
        """Run the undo commands now (reverse order), forget them."""
        errs = run_undo(self.state["undo"])
        self.state["undo"] = []
        self.save()
        return {"errors": errs}

    def op_put(self, req: dict[str, Any]) -> dict[str, Any]:
        p = self.path(req["path"])
        os.makedirs(os.path.dirname(p), exist_ok=True)
        tmp = f"{p}.juice-tmp{threading.get_ident()}"  # two writers of one path do not share it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, int(req.get("mode", 0o644)))
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(req["data"]))
        os.chmod(tmp, int(req.get("mode", 0o644)))
        os.replace(tmp, p)
        return {"path": p}

    def op_get(self, req: dict[str, Any]) -> dict[str, Any]:
        p = self.path(req["path"])
        try:
            with open(p, "rb") as f:
                data = f.read(int(req.get("max", MAX_GET)))
        except FileNotFoundError:
            return {"missing": True}
        return {"data": base64.b64encode(data).decode()}

    def op_mkdir(self, req: dict[str, Any]) -> dict[str, Any]:
        p = self.path(req["path"])
        os.makedirs(p, exist_ok=True)
        if req.get("owner"):
            subprocess.run(["chown", "-R", req["owner"], p], check=True, timeout=60)
        return {"path": p}

    def op_tcp(self, req: dict[str, Any]) -> dict[str, Any]:
        """TCP connects from this host (``n`` of them): their times in ms, or the error."""
        times: list[float] = []
        for _ in range(int(req.get("n", 1))):
            t0 = time.perf_counter()
            try:
                socket.create_connection((req["host"], int(req["port"])),
                                         timeout=float(req.get("timeout_s", 2))).close()
            except OSError as e:
                return {"ok": False, "error": f"{type(e).__name__}: {e}", "ms": times}
            times.append((time.perf_counter() - t0) * 1000)
        return {"ok": True, "ms": times}

    def op_http(self, req: dict[str, Any]) -> dict[str, Any]:
        """One HTTP GET from this host (a health check): status and the body's head."""
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(req["url"], timeout=float(req.get("timeout_s", 5))) as r:
                return {"status": r.status, "body": r.read(4096).decode(errors="replace")}
        except urllib.error.HTTPError as e:
            return {"status": e.code, "body": ""}
        except OSError as e:
            return {"status": None, "error": f"{type(e).__name__}: {e}"}

    def op_request(self, req: dict[str, Any]) -> dict[str, Any]:
        """One HTTP request from this host (an API call made from inside the site): status,
        headers (lower case) and the body, base64; status None with the error when none."""
        import http.client
        import urllib.parse

        u = urllib.parse.urlsplit(req["url"])
        body = base64.b64decode(req["body"]) if req.get("body") is not None else None
        conn = http.client.HTTPConnection(u.hostname or "", u.port or 80,
                                          timeout=float(req.get("timeout_s", 30)))
        try:
            conn.request(req["method"], u.path + (f"?{u.query}" if u.query else ""), body=body,
                         headers=dict(req.get("headers") or {}))
            r = conn.getresponse()
            return {"status": r.status, "headers": {k.lower(): v for k, v in r.getheaders()},
                    "body": base64.b64encode(r.read()).decode()}
        except OSError as e:
            return {"status": None, "error": f"{type(e).__name__}: {e}"}
        finally:
            conn.close()

    def op_listen(self, req: dict[str, Any]) -> dict[str, Any]:
        """A TCP listener on ``host`` (port chosen by the kernel) that accepts and closes: the
        other hosts measure their RTT to this one against it."""
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind((req["host"], 0))
        srv.listen(128)
        self.listeners.append(srv)

        def accept() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=accept, daemon=True).start()
        return {"port": srv.getsockname()[1]}

    def finish(self) -> None:
        """Undo (WAN rules first: no packet left queued to a stopped delayer), stop what was
        started, remove ROOT (and the base directory when no other lab uses it)."""
        for srv in self.listeners:
            srv.close()
        run_undo(self.state["undo"])
        kill_all(self.state["procs"], signal.SIGTERM, 20)
        for child in self.children.values():
            child.poll()
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(BASE)
        except OSError:
            pass


def run_undo(undo: list[list[str]]) -> list[str]:
    errs = []
    for argv in reversed(undo):
        try:
            cp = subprocess.run(argv, capture_output=True, timeout=30)
            if cp.returncode != 0:
                errs.append(f"{' '.join(argv)}: {cp.stderr.decode(errors='replace').strip()[:200]}")
        except (OSError, subprocess.TimeoutExpired) as e:
            errs.append(f"{' '.join(argv)}: {e}")
    return errs


def sweep(exclude: str) -> list[str]:
    """Clean up after agents that died without finishing (their ROOT still exists)."""
    swept: list[str] = []
    try:
        names = sorted(os.listdir(BASE))
    except OSError:
        return swept
    for name in names:
        root = os.path.join(BASE, name)
        if root == exclude or not os.path.isdir(root):
            continue
        try:
            with open(os.path.join(root, "agent.json")) as f:
                st = json.load(f)
            pid, start = st["agent"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not an agent's directory (or being written): left alone
        if alive(int(pid), start):
            continue
        run_undo(st.get("undo", []))
        kill_all(st.get("procs", []), signal.SIGTERM, 10)
        shutil.rmtree(root, ignore_errors=True)
        swept.append(name)
    return swept


class Replies:
    """The agent's stdout: one JSON line per answer, written whole (threads answer)."""

    def __init__(self, out: IO[str]) -> None:
        self.out, self.lock = out, threading.Lock()

    def send(self, msg: dict[str, Any]) -> None:
        with self.lock:
            try:
                self.out.write(json.dumps(msg) + "\n")
                self.out.flush()
            except (BrokenPipeError, ValueError):
                pass  # Juice is gone: the main loop sees stdin close and cleans up


def answer(agent: Agent, replies: Replies, req: dict[str, Any], slots: threading.BoundedSemaphore) -> None:
    rid, op = req.get("id"), req.get("op")
    try:
        fn = getattr(agent, f"op_{op}", None)
        try:
            if fn is None:
                raise ValueError(f"unknown op {op!r}")
            if op in STATEFUL:
                with agent.lock:
                    res = fn(req)
            else:
                res = fn(req)
            res.update({"id": rid, "ok": True})
        except Exception as e:  # the error goes back to Juice, the agent stays up
            res = {"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"}
        replies.send(res)
    finally:
        slots.release()


def main(lab: str) -> None:
    agent = Agent(lab)
    replies = Replies(sys.stdout)
    slots = threading.BoundedSemaphore(MAX_INFLIGHT)
    try:
        for line in sys.stdin:
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if req.get("op") == "bye":
                with agent.lock:
                    agent.finish()
                replies.send({"id": req.get("id"), "ok": True})
                return
            slots.acquire()
            threading.Thread(target=answer, args=(agent, replies, req, slots), daemon=True).start()
    except KeyboardInterrupt:
        pass
    with agent.lock:
        agent.finish()  # stdin closed: Juice is gone, leave nothing


if __name__ == "__main__":  # shipped: Juice prepends ``JUICE_LAB = "<lab>"``
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    main(str(globals().get("JUICE_LAB") or (sys.argv[1] if len(sys.argv) > 1 else "")))
