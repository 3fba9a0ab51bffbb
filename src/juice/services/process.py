"""One way to start a server in a site: spawn it, know its pid, wait for it, stop it.

Every service starts its servers alike: output appended to a log file, the server spawned
inside its site's network namespace (``lab.popen``), its pid and kernel start time
recorded, a bounded wait for health that gives up early when the process exits, and a
graceful stop by the recorded pid (never by name; the start time guards against a recycled
pid). ``spawn`` does all of it and returns a ``Server`` handle.

A new server takes about ten lines (a NATS server, say)::

    from juice.services.process import port_open, spawn

    def start_nats(lab: Sites, site: int, home: Path) -> Server:
        ip = lab.site_ip(site)
        home.mkdir(parents=True, exist_ok=True)
        srv = spawn(lab, site, ["/usr/bin/nats-server", "-a", ip, "-p", "4222"],
                    log=home / "nats.log", what=f"nats in site {site}")
        srv.wait_ready(lambda: port_open(lab, site, ip, 4222), timeout=30)
        return srv                   # ServiceError "nats in site 2: exited with code 1 (log: ...)"

    srv.record("nats", port=4222, datadir=home)   # a ServerRecord for services.json
    srv.stop(grace_s=10)                          # TERM by recorded pid, bounded, then KILL

Where the pid comes from:

- by default the spawned process IS the server (``ip netns exec`` execs it: memcached,
  redis-server, gunicorn, cockroach): its pid and start time are recorded at once;
- with ``pidfile=`` the server's own pid file names it (mariadbd, postgres): the file is
  removed before the start, ``wait_ready`` waits for it first (same deadline) and records
  the pid and its start time, and ``stop`` reads it when ``wait_ready`` never got that far.

``lab=None`` runs the process on this host, outside any site: short-lived helper servers
with networking off (the MariaDB template that creates the Juice user). ``stop_all`` signals
many servers at once and waits for them together (one grace period, not one per server).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from juice.services.base import ServerRecord, Sites, from_site, read_pidfile, reap, wait_for
from juice.util import proc


@dataclass(eq=False)
class Server:
    """A started server process (see the module doc). ``what`` names it in errors."""

    what: str
    site: int
    child: subprocess.Popen[bytes] | None
    log: Path | None            # where its stdout/stderr go (None: discarded)
    tail: Path | None           # the log whose tail explains a failure
    pidfile: Path | None = None
    pid: int | None = None      # the server's pid once known
    pid_start: int | None = None  # its kernel start time (guards against pid reuse)

    def exited(self) -> str | None:
        """Why waiting is pointless: the spawned process has exited (None while it runs)."""
        if self.child is not None and self.child.poll() is not None:
            return f"exited with code {self.child.returncode}"
        return None

    def running(self) -> bool:
        """True while the recorded server process runs (same pid AND same start time)."""
        return self.pid is not None and proc.alive(self.pid, self.pid_start)

    def wait_ready(self, check: Callable[[], bool], timeout: float, what: str | None = None, *,
                   interval: float = 0.1, fail: Callable[[], str | None] | None = None) -> None:
        """Poll ``check`` until true, within ``timeout`` s (the pid file first, when there is
        one). ServiceError "<what>: <why> (log: <tail>)" on timeout, at once when the process
        exits or ``fail`` gives a reason (e.g. workers crash-looping)."""
        what = what or self.what
        deadline = time.monotonic() + timeout

        def why() -> str | None:
            return self.exited() or (fail() if fail else None)

        if self.pid is None and self.pidfile is not None:
            pidfile = self.pidfile
            wait_for(lambda: read_pidfile(pidfile) is not None, timeout, what, self.tail, fail=why)
            self.pid = read_pidfile(pidfile)
            self.pid_start = proc.start_time(self.pid) if self.pid else None
        wait_for(check, max(0.0, deadline - time.monotonic()), what, self.tail, interval, fail=why)

    def _target(self) -> int | None:
        """The pid to signal: the recorded one (if it is still the same process), else the
        pid file's, else the spawned process while it runs."""
        if self.pid is not None:
            return self.pid if self.running() else None
        pid = read_pidfile(self.pidfile) if self.pidfile is not None else None
        if pid is None and self.child is not None and self.child.poll() is None:
            pid = self.child.pid
        return pid if pid is not None and proc.alive(pid) else None

    def stop(self, grace_s: float = 30.0, sig: int = signal.SIGTERM) -> None:
        """``sig``, wait up to ``grace_s`` (bounded), then SIGKILL; the wrapper is reaped."""
        stop_all([self], grace_s, sig)

    def kill(self, extra: Iterable[int] = ()) -> int | None:
        """SIGKILL the server (a crash, for fault injection) and ``extra`` pids (e.g. its
        workers) at once, wait until they are gone (bounded) and reap; returns the pid killed."""
        pid = self._target()
        pids = [p for p in [pid, *extra] if p is not None and proc.alive(p)]
        if pids:
            proc.terminate(pids, grace_s=0.0, sig=signal.SIGKILL)
        reap(self.child)
        self.child = None
        return pid

    def record(self, kind: str, *, port: int, datadir: Path,
               extra: Mapping[str, Any] | None = None) -> ServerRecord:
        """What ``services.json`` keeps about this server (``juice db status/down``)."""
        return ServerRecord(kind=kind, site=self.site, pid=self.pid or 0, pid_start=self.pid_start,
                            datadir=str(datadir), log=str(self.tail or ""), port=port,
                            extra=dict(extra or {}))


def spawn(lab: Sites | None, site: int, argv: Sequence[str], *, log: Path | None, what: str,
          tail: Path | None = None, pidfile: Path | None = None, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Server:
    """Start ``argv`` inside ``site`` of ``lab`` (on this host when ``lab`` is None), its
    output appended to ``log``. ``tail`` is the log quoted on failure (default ``log``);
    ``pidfile``: the server's pid comes from that file (see the module doc)."""
    if pidfile is not None:
        pidfile.unlink(missing_ok=True)  # a stale file would name another process
    _note_spawn(what)
    out: IO[Any] | int
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    try:
        if lab is None:
            child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                     env=env, cwd=cwd)
        else:
            child = lab.popen(site, argv, stdout=out, stderr=out, env=env, cwd=cwd)
    finally:
        if not isinstance(out, int):
            out.close()  # the child holds its own descriptor
    srv = Server(what=what, site=site, child=child, log=log, tail=tail or log, pidfile=pidfile)
    if pidfile is None:
        srv.pid, srv.pid_start = child.pid, proc.start_time(child.pid)
    return srv


def _note_spawn(what: str) -> None:
    """With ``$JUICE_SPAWN_LOG`` set (the test suite sets it), append which server starts and
    under which test (pytest's ``$PYTEST_CURRENT_TEST``, inherited by ``juice`` subprocesses):
    the suite's list of tests that start real servers is made from it."""
    path = os.environ.get("JUICE_SPAWN_LOG")
    if path:
        line = json.dumps({"server": what.split(" ")[0], "what": what,
                           "test": os.environ.get("PYTEST_CURRENT_TEST", "")})
        with open(path, "a") as f:
            f.write(line + "\n")


def stop_all(servers: Iterable[Server], grace_s: float = 30.0, sig: int = signal.SIGTERM) -> None:
    """Signal every server at once, wait up to ``grace_s`` for all (bounded), SIGKILL the rest,
    then reap the spawned processes. Servers already gone are skipped."""
    servers = list(servers)
    pids = [pid for s in servers if (pid := s._target()) is not None]
    if pids:
        proc.terminate(pids, grace_s=grace_s, sig=sig)
    for s in servers:
        reap(s.child)
        s.child = None


def port_open(lab: Sites, site: int, host: str, port: int, timeout: float = 1.0) -> bool:
    """True when ``host:port`` accepts a TCP connection made from inside ``site``."""
    def probe() -> bool:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return True
        except OSError:
            return False

    return from_site(lab, site, probe, timeout=timeout + 10)
