"""The lifecycle every real component follows, and the helpers they share.

Contract (one ``Service`` per deployment of a component, possibly many servers)::

    svc = SomeService(lab, **options)  # pure: nothing started
    svc.configure()                    # data dirs + config files at each site's place
    svc.start()                        # servers started at their sites' places
    svc.wait_healthy(timeout=60)       # bounded; raises ServiceError with the log tail
    svc.endpoint(site)                 # where a client IN ``site`` should connect
    svc.collect_logs(dest)             # copy server logs (e.g. into a run's results dir)
    svc.stop()                         # graceful shutdown of every server it started

``Sites`` is the part of a lab a service needs (``LocalLab`` and ``RemoteLab`` provide it):
every service works through ``lab.place(site)`` (``juice.lab.place``). Data dirs, logs and
sockets live under the place's ``root`` (the lab's directory there) so lab teardown removes
them, and server processes run in the sites so teardown (or the crash sweep) kills them.

Servers are started with ``juice.services.process.spawn`` (one way for every service: log,
pid, bounded health wait, stop by recorded pid); client code reaches a site with
``from_site(lab, site, fn)``.
"""

from __future__ import annotations

import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, TypedDict, TypeVar, runtime_checkable

from juice.errors import ServiceError
from juice.lab.place import Place, ThisHost
from juice.lab.place import Sites as Sites  # re-exported: what a service uses of a lab
from juice.lab.setns import in_site
from juice.util import proc

Progress = Callable[[str], None]
T = TypeVar("T")


def quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Endpoint:
    """A server's address for a client of a database, cache or bus: ``driver`` is the wire
    protocol (``mysql``, ``postgresql``, ``memcached``, ``redis``, ``rabbit``, ``nats``);
    ``database`` the database (or vhost) when the protocol has one. HTTP services have URLs."""

    driver: str
    host: str
    port: int
    user: str
    password: str = ""
    database: str = ""
    site: int = 0  # the site the server runs in

    def url(self) -> str:
        """An SQLAlchemy-style URL (what Keystone/oslo.db take)."""
        scheme = "mysql+pymysql" if self.driver == "mysql" else "postgresql+psycopg2"
        auth = self.user + (f":{self.password}" if self.password else "")
        return f"{scheme}://{auth}@{self.host}:{self.port}/{self.database}"


@dataclass(frozen=True)
class Endpoints:
    """Where a client in one site reads and writes (the same server unless read-local)."""

    read: Endpoint
    write: Endpoint


@dataclass
class ServerRecord:
    """One started server, as recorded in ``<workdir>/services.json`` (for status/down)."""

    kind: str
    site: int
    pid: int
    pid_start: int | None
    datadir: str
    log: str
    port: int
    extra: Mapping[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class Service(ABC):
    """One deployment of a component in a lab. See the module doc for the contract."""

    kind: str = ""

    def __init__(self, lab: Sites, progress: Progress = quiet) -> None:
        self.lab = lab
        self.progress = progress

    @abstractmethod
    def configure(self) -> None: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def wait_healthy(self, timeout: float = 60.0) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def endpoint(self, site: int) -> Endpoints:
        """Where a client in ``site`` reads and writes: databases, caches and buses. HTTP
        services give URLs instead (``url()``, ``api_url()``, ``auth_url(site)``)."""
        raise ServiceError(f"{self.kind}: not a database, cache or bus (no endpoint); use its URL")

    @abstractmethod
    def records(self) -> list[ServerRecord]: ...

    def logs(self) -> list[tuple[Place, Path]]:
        """Every server log with the place it is at. A service overrides this or
        ``log_files`` (the logs on this machine)."""
        here = ThisHost()
        return [(here, p) for p in self.log_files()]

    def log_files(self) -> list[Path]:
        """The paths of ``logs`` (on this machine for a local lab)."""
        return [p for _, p in self.logs()]

    def kill(self, site: int) -> dict[str, object]:
        """SIGKILL this service's server in ``site`` (a crash, for fault schedules); returns
        facts about it (``pid``). It stays down until ``restart`` (or ``stop`` forgets it)."""
        raise ServiceError(f"{self.kind}: killing one server is not supported")

    def restart(self, site: int, timeout: float = 300.0) -> dict[str, object]:
        """Start the server killed in ``site`` again and wait until it serves (bounded)."""
        raise ServiceError(f"{self.kind}: restarting one server is not supported")

    def collect_logs(self, dest: Path) -> list[Path]:
        """Copy every server log into ``dest``; returns the copies."""
        dest.mkdir(parents=True, exist_ok=True)
        out = []
        for place, log in self.logs():
            target = dest / f"{log.parent.name}-{log.name}"
            if place.fetch(log, target):
                out.append(target)
        return out

    def up(self, timeout: float = 120.0) -> Service:
        """configure + start + wait_healthy; on failure stops what started and re-raises."""
        try:
            self.configure()
            self.start()
            self.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---- helpers -----------------------------------------------------------------------------

def site_ns(lab: Sites, site: int) -> str | None:
    """The network namespace of ``site`` when the lab has one (``LocalLab.site_ns``)."""
    fn = getattr(lab, "site_ns", None)
    return str(fn(site)) if callable(fn) else None


def from_site(lab: Sites, site: int, fn: Callable[[], T], timeout: float = 10.0) -> T:
    """``fn()`` run inside ``site``'s network namespace, so the sockets it opens reach the lab
    addresses across the emulated WAN (called directly when the lab has no namespaces)."""
    ns = site_ns(lab, site)
    return fn() if ns is None else in_site(ns, fn, timeout=timeout)


def log_tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return f"(no log at {log})"
    return " | ".join(x.strip() for x in text[-lines:]) or "(empty log)"


def wait_for(check: Callable[[], bool], timeout: float, what: str, log: Path | None = None,
             interval: float = 0.1, fail: Callable[[], str | None] | None = None) -> None:
    """Poll ``check`` until true (bounded); ServiceError naming ``what`` and the log tail.

    ``fail`` returns a reason when waiting is pointless (e.g. the server exited).
    """
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        reason = fail() if fail else None
        if reason or time.monotonic() >= deadline:
            why = reason or f"not ready after {timeout:.0f} s"
            tail = f" (log: {log_tail(log)})" if log else ""
            raise ServiceError(f"{what}: {why}{tail}")
        time.sleep(interval)


def stop_pid(pid: int | None, started: int | None, sig: int = signal.SIGTERM,
             grace_s: float = 30.0) -> None:
    """Graceful stop: ``sig``, wait up to ``grace_s`` (bounded), then SIGKILL.

    ``started`` (the kernel start time) guards against signalling a recycled pid."""
    if pid and proc.alive(pid, started):
        proc.terminate([pid], grace_s=grace_s, sig=sig)


class ServerRecordDict(TypedDict):
    """``ServerRecord.as_dict()``: a server as services.json / keystone.json record it."""

    kind: str
    site: int
    pid: int
    pid_start: int | None
    datadir: str
    log: str
    port: int
    extra: dict[str, object]


@runtime_checkable
class HasRecords(Protocol):
    """What the resource profile reads of a service: its servers."""

    def records(self) -> list[ServerRecord]: ...


def services_in(obj: object, depth: int = 2) -> list[HasRecords]:
    """The services (objects with a callable ``records``) in ``obj``, its attributes, mapping
    values and list items, ``depth`` levels down (a deployment's ``db``, ``ks``, ``sess.svc``)."""
    found: dict[int, HasRecords] = {}

    def walk(o: object, d: int) -> None:
        if o is None or isinstance(o, str | bytes | int | float | bool | Path):
            return
        if isinstance(o, HasRecords) and callable(o.records):
            found.setdefault(id(o), o)
            return
        if d <= 0:
            return
        if isinstance(o, Mapping):
            items: list[object] = list(o.values())
        elif isinstance(o, list | tuple | set):
            items = list(o)
        else:
            try:
                items = list(vars(o).values())
            except TypeError:
                return
        for i in items:
            walk(i, d - 1)

    walk(obj, depth)
    return list(found.values())
