"""One way to start a server in a site: spawn it, know its pid, wait for it, stop it.

Every service starts its servers alike, at a PLACE (``juice.lab.place``: a site's network
namespace here, or an SSH host): output appended to a log file at the place, its pid and
kernel start time recorded, a bounded wait for health that gives up early when the process
exits (with the log's tail), and a graceful stop by the recorded pid (never by name; the
start time guards against a recycled pid). ``spawn`` does all of it and returns a ``Server``.

A new server takes about ten lines (a NATS server, say), and runs unchanged in a lab's
namespace or on an SSH host::

    from juice.services.process import port_open, spawn

    def start_nats(lab: Sites, site: int) -> Server:
        place = lab.place(site)
        home = place.root / f"s{site}" / "nats"
        place.mkdir(home)
        srv = spawn(place, ["/usr/bin/nats-server", "-a", place.address, "-p", "4222"],
                    log=home / "nats.log", what=f"nats in site {site}")
        srv.wait_ready(lambda: port_open(place, place.address, 4222), timeout=30)
        return srv                   # ServiceError "nats in site 2: exited with code 1 (log: ...)"

    srv.record("nats", port=4222, datadir=home)   # a ServerRecord for services.json
    srv.stop(grace_s=10)                          # TERM by recorded pid, bounded, then KILL

Where the pid comes from:

- by default the spawned process IS the server (``ip netns exec`` execs it here; the host
  agent spawns it there: memcached, redis-server, gunicorn, cockroach): its pid and start
  time are recorded at once;
- with ``pidfile=`` the server's own pid file names it (mariadbd, postgres): the file is
  removed before the start, ``wait_ready`` waits for it first (same deadline) and records
  the pid and its start time (the place adopts it), and ``stop`` reads it when
  ``wait_ready`` never got that far.

``ThisHost()`` runs the process on this machine, outside any site: short-lived helper
servers with networking off. ``stop_all`` signals many servers at once and waits for them
together (one grace period per machine, not one per server).

A service that runs one server at one site (haproxy, redis, a PostgreSQL server, a gunicorn
API) mixes in ``SiteServer``: its ``place``, its ``home`` (``<root>/s<site>/<DIR>``) and the
handle's lifecycle (``spawn_server``, ``wait_server``, ``stop_server``, ``server_records``).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from juice.errors import ServiceError
from juice.lab.place import Place, Proc
from juice.services.base import ServerRecord, Sites


@dataclass(eq=False)
class Server:
    """A started server process at ``place`` (see the module doc). ``what`` names it in errors."""

    what: str
    place: Place
    proc: Proc | None           # what the place started (None once released)
    log: Path | None            # where its stdout/stderr go (None: discarded)
    tail: Path | None           # the log whose tail explains a failure
    pidfile: Path | None = None
    pid: int | None = None      # the server's pid once known
    pid_start: int | None = None  # its kernel start time (guards against pid reuse)

    @property
    def site(self) -> int:
        return self.place.site

    def exit_code(self) -> int | None:
        """The spawned process's exit code once it has exited (None while it runs)."""
        return self.place.exit_code(self.proc) if self.proc is not None else None

    def exited(self) -> str | None:
        """Why waiting is pointless: the spawned process has exited (None while it runs)."""
        code = self.exit_code()
        return f"exited with code {code}" if code is not None else None

    def running(self) -> bool:
        """True while the recorded server process runs (same pid AND same start time)."""
        return self.pid is not None and self.place.alive((self.pid, self.pid_start))

    def log_tail(self, lines: int = 3) -> str:
        """The last lines of ``tail`` (read at the place)."""
        return tail_at(self.place, self.tail, lines) if self.tail is not None else "(no log)"

    def _pidfile_pid(self) -> int | None:
        return pid_in(self.place, self.pidfile) if self.pidfile is not None else None

    def wait_ready(self, check: Callable[[], bool], timeout: float, what: str | None = None, *,
                   interval: float = 0.1, fail: Callable[[], str | None] | None = None) -> None:
        """Poll ``check`` until true, within ``timeout`` s (the pid file first, when there is
        one). ServiceError "<what>: <why> (log: <tail>)" on timeout, at once when the process
        exits or ``fail`` gives a reason (e.g. workers crash-looping)."""
        what = what or self.what
        deadline = time.monotonic() + timeout

        def why() -> str | None:
            return self.exited() or (fail() if fail else None)

        def wait(ok: Callable[[], bool]) -> None:
            while not ok():
                reason = why()
                if reason or time.monotonic() >= deadline:
                    raise ServiceError(f"{what}: {reason or f'not ready after {timeout:.0f} s'} "
                                       f"(log: {self.log_tail()})")
                time.sleep(interval)

        if self.pid is None and self.pidfile is not None:
            wait(lambda: self._pidfile_pid() is not None)
            pid = self._pidfile_pid()
            ref = self.place.adopt(pid) if pid else None
            self.pid, self.pid_start = ref if ref else (pid, None)
        wait(check)

    def _target(self) -> tuple[int, int | None] | None:
        """The process to signal: the recorded one (if it is still the same process), else the
        pid file's, else the spawned process while it runs."""
        if self.pid is not None:
            return (self.pid, self.pid_start) if self.running() else None
        pid = self._pidfile_pid()
        if pid is not None:
            return self.place.adopt(pid)
        if self.proc is not None and self.exit_code() is None:
            return self.proc.ref
        return None

    def stop(self, grace_s: float = 30.0, sig: int = signal.SIGTERM) -> None:
        """``sig``, wait up to ``grace_s`` (bounded), then SIGKILL; the spawned process is released."""
        stop_all([self], grace_s, sig)

    def kill(self, extra: Iterable[int] = ()) -> int | None:
        """SIGKILL the server (a crash, for fault injection) and ``extra`` pids (e.g. its
        workers) at once, wait until they are gone (bounded) and release; returns the pid killed."""
        target = self._target()
        refs = [r for r in [target, *((p, None) for p in extra)] if r is not None]
        if refs:
            self.place.terminate(refs, grace_s=0.0, sig=signal.SIGKILL)
        if self.proc is not None:
            self.place.release(self.proc)
            self.proc = None
        return target[0] if target else None

    def record(self, kind: str, *, port: int, datadir: Path,
               extra: Mapping[str, object] | None = None) -> ServerRecord:
        """What ``services.json`` keeps about this server (``juice db status/down``)."""
        return ServerRecord(kind=kind, site=self.site, pid=self.pid or 0, pid_start=self.pid_start,
                            datadir=str(datadir), log=str(self.tail or ""), port=port,
                            extra=dict(extra or {}))


class SiteServer:
    """One server of a service at site ``site``'s place: ``home`` is ``<root>/s<site>/<DIR>``
    there; ``server`` is its handle from ``spawn_server`` until ``stop_server`` (None before and
    after). The class sets ``DIR`` and its instances ``lab``, ``site`` and ``server``."""

    DIR: ClassVar[str]
    lab: Sites
    site: int
    server: Server | None

    @property
    def place(self) -> Place:
        return self.lab.place(self.site)

    @property
    def home(self) -> Path:
        return self.place.root / f"s{self.site}" / self.DIR

    def spawn_server(self, argv: Sequence[str], *, log: Path, what: str, pidfile: Path | None = None,
                     env: dict[str, str] | None = None, cwd: Path | None = None) -> Server:
        """``spawn`` at ``place``; the handle is kept as ``server``."""
        self.server = spawn(self.place, argv, log=log, what=what, pidfile=pidfile, env=env, cwd=cwd)
        return self.server

    def wait_server(self, check: Callable[[], bool], timeout: float, *, not_started: str,
                    interval: float = 0.1) -> None:
        """``Server.wait_ready`` on the handle; ServiceError ``not_started`` when there is none."""
        if self.server is None:
            raise ServiceError(not_started)
        self.server.wait_ready(check, timeout, interval=interval)

    def stop_server(self, grace_s: float, sig: int = signal.SIGTERM) -> bool:
        """Stop the server (``Server.stop``) and forget the handle; False when there was none."""
        if self.server is None:
            return False
        self.server.stop(grace_s=grace_s, sig=sig)
        self.server = None
        return True

    def server_records(self, kind: str, *, port: int, datadir: Path,
                       extra: Mapping[str, object] | None = None) -> list[ServerRecord]:
        """The server's record for ``services.json`` (none when it is not started)."""
        if self.server is None:
            return []
        return [self.server.record(kind, port=port, datadir=datadir, extra=extra)]


def pid_in(place: Place, pidfile: Path) -> int | None:
    """The pid a server's pid file at ``place`` names (None: no file, or not a pid yet)."""
    raw = place.read(pidfile)
    words = raw.decode(errors="replace").split() if raw else []
    return int(words[0]) if words and words[0].isdigit() else None


def tail_at(place: Place, log: Path, lines: int = 3) -> str:
    """The last ``lines`` lines of ``log`` at ``place``, joined by " | " (for error messages)."""
    raw = place.read(log, max_bytes=1 << 20)
    if raw is None:
        return f"(no log at {log})"
    text = raw.decode(errors="replace").strip().splitlines()
    return " | ".join(x.strip() for x in text[-lines:]) or "(empty log)"


def spawn(place: Place, argv: Sequence[str], *, log: Path | None, what: str,
          tail: Path | None = None, pidfile: Path | None = None, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Server:
    """Start ``argv`` at ``place`` (a lab's site: ``lab.place(site)``; ``ThisHost()`` for this
    machine outside any site), its output appended to ``log``. ``tail`` is the log quoted on
    failure (default ``log``); ``pidfile``: the server's pid comes from that file (see the
    module doc)."""
    if pidfile is not None:
        place.remove(pidfile)  # a stale file would name another process
    _note_spawn(what)
    p = place.start(argv, log=log, env=env, cwd=cwd)
    srv = Server(what=what, place=place, proc=p, log=log, tail=tail or log, pidfile=pidfile)
    if pidfile is None:
        srv.pid, srv.pid_start = p.pid, p.start
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
    then release the spawned processes. Servers already gone are skipped. Servers at several
    places are stopped place by place (one grace period each)."""
    servers = list(servers)
    by_machine: dict[str, tuple[Place, list[tuple[int, int | None]]]] = {}
    for s in servers:
        t = s._target()
        if t is not None:
            by_machine.setdefault(s.place.machine, (s.place, []))[1].append(t)
    for place, refs in by_machine.values():
        place.terminate(refs, grace_s=grace_s, sig=sig)
    for s in servers:
        if s.proc is not None:
            s.place.release(s.proc)
            s.proc = None


def children(place: Place, pid: int | None) -> list[int]:
    """The direct children of ``pid`` at ``place`` (a gunicorn master's workers), by parent
    pid (never by name)."""
    if not pid:
        return []
    r = place.run(["ps", "-o", "pid=", "--ppid", str(pid)])
    return [int(x) for x in r.out.split() if x.isdigit()]


def rss(place: Place, pids: Iterable[int]) -> dict[int, int]:
    """Resident set size (bytes) of each of ``pids`` at ``place``, from its ``/proc/<pid>/status``
    (read there, one command); a pid that is gone is left out."""
    want = sorted({p for p in pids if p})
    if not want:
        return {}
    r = place.run(["cat", *(f"/proc/{p}/status" for p in want)])  # rc 1 when one is gone
    out: dict[int, int] = {}
    pid = None
    for line in r.out.splitlines():
        key, _, value = line.partition(":")
        if key == "Pid":
            pid = int(value.strip())
        elif key == "VmRSS" and pid in want:
            out[pid] = int(value.split()[0]) * 1024
    return out


def memory(place: Place, pids: Iterable[int]) -> dict[int, dict[str, int]]:
    """``rss``, ``pss`` and ``uss`` (private clean + dirty) in bytes of each of ``pids`` at
    ``place``, from ``/proc/<pid>/smaps_rollup`` (one command); a pid gone or unreadable is left out.
    PSS shares each shared page among the processes mapping it; USS is what the process alone
    holds (what freeing it would return): the added memory of a forked child."""
    want = sorted({p for p in pids if p})
    if not want:
        return {}
    r = place.run(["grep", "-H", "-E", "^(Rss|Pss|Private_Clean|Private_Dirty):",
                   *(f"/proc/{p}/smaps_rollup" for p in want)])  # rc 2 when one is gone
    out: dict[int, dict[str, int]] = {}
    for line in r.out.splitlines():
        path, _, rest = line.partition(":")
        key, _, value = rest.partition(":")
        try:
            pid, kb = int(path.split("/")[2]), int(value.split()[0]) * 1024
        except (IndexError, ValueError):
            continue
        m = out.setdefault(pid, {"rss": 0, "pss": 0, "uss": 0})
        if key == "Rss":
            m["rss"] = kb
        elif key == "Pss":
            m["pss"] = kb
        else:
            m["uss"] += kb
    return out


def run_to_end(place: Place, argv: Sequence[str | Path], *, log: Path, what: str, timeout: float = 300.0,
               env: dict[str, str] | None = None) -> float:
    """Run a command-line tool at ``place`` to completion (bounded); its output appended to
    ``log`` there. Returns its duration; ServiceError with the output's tail on failure."""
    t0 = time.monotonic()
    place.mkdir(log.parent)
    r = place.run([str(a) for a in argv], timeout=timeout, env=env)
    place.write(log, (place.read(log) or b"") + f"--- {what}\n{r.out}{r.err}".encode())
    tail = " | ".join((r.out + r.err).strip().splitlines()[-5:]) or "(no output)"
    if r.rc is None:
        raise ServiceError(f"{what}: {r.err or 'no answer'} (log: {tail})")
    if r.rc != 0:
        raise ServiceError(f"{what} failed with code {r.rc} (log: {tail})")
    return time.monotonic() - t0


def port_open(place: Place, host: str, port: int, timeout: float = 1.0) -> bool:
    """True when ``host:port`` accepts a TCP connection made from inside ``place``."""
    return place.tcp_open(host, port, timeout)
