"""Where a process runs: a PLACE is one site of a lab, seen by the services that run there.

Two kinds satisfy the one protocol ``Place``: a network namespace on this machine
(``NetnsPlace``, the local lab's sites) and an SSH host reached through its host agent
(``juice.lab.hostplace.HostPlace``). A service is written once against ``Place`` and runs
unchanged on either; it never asks which kind it has. Everything a service does in a site
goes through its place:

    place = lab.place(2)
    home = place.root / "s2" / "nats"                  # a path AT the place (not here)
    place.mkdir(home)
    place.write(home / "nats.conf", conf)                # atomic; mode/owner optional
    p = place.start(["/usr/bin/nats-server", "-c", str(home / "nats.conf")], log=home / "nats.log")
    place.tcp_open(place.address, 4222)                  # probed from inside the site
    place.exit_code(p)                                   # None while it runs
    place.terminate([p.ref], grace_s=10)                 # by recorded pid + start time
    place.fetch(home / "nats.log", dest)                 # a copy here, for the results

``juice.services.process.spawn(place, ...)`` builds the usual server handle on top (log tail
on failure, bounded health wait, stop by recorded pid). Paths are POSIX paths at the place:
``root`` is the lab's directory there (``lab.workdir`` here; ``/var/tmp/juice-host/<lab>`` on
a host), and nothing outside it is written. What differs between places is a property of the
place, never a branch in a service: ``shared_disk`` (the place sees this machine's files:
Galera's pre-seeded datadirs, one Keystone key repository) is the only one so far.

``ThisHost`` is this machine outside any site (short-lived helpers with networking off).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

from juice import onhost
from juice.lab.setns import in_site
from juice.lab.spec import LabSpec
from juice.util import atomic, proc

if TYPE_CHECKING:
    from juice.lab.check import CheckReport

T = TypeVar("T")
Ref = tuple[int, int | None]  # (pid, kernel start time): a process, not a recycled pid


@dataclass
class Proc:
    """A process a place started: its pid and start time, and the place's own handle."""

    pid: int
    start: int | None
    handle: Any = field(default=None, repr=False)  # subprocess.Popen here, the agent's Proc there

    @property
    def ref(self) -> Ref:
        return (self.pid, self.start)


@dataclass(frozen=True)
class Result:
    """A finished command: exit code (None: timed out or could not start), its output."""

    rc: int | None
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


class Place(Protocol):
    """One site of a lab, where servers run (see the module doc)."""

    @property
    def site(self) -> int: ...

    @property
    def label(self) -> str: ...        # "site 2", "site 2 (host h2)": for messages

    @property
    def address(self) -> str: ...      # the site's address on the lab network

    @property
    def root(self) -> Path: ...        # the lab's directory at this place

    @property
    def shared_disk(self) -> bool: ...  # True when the place sees this machine's files

    @property
    def machine(self) -> str: ...      # places on one machine signal each other's processes

    def start(self, argv: Sequence[str], *, log: Path | None, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Proc: ...

    def exit_code(self, p: Proc) -> int | None: ...

    def alive(self, ref: Ref) -> bool: ...

    def adopt(self, pid: int) -> Ref | None: ...

    def terminate(self, refs: Sequence[Ref], grace_s: float = 30.0, sig: int = 15) -> None: ...

    def release(self, p: Proc) -> None: ...

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
            env: Mapping[str, str] | None = None) -> Result: ...

    def write(self, path: Path, data: str | bytes, *, mode: int = 0o644,
              owner: str | None = None) -> None: ...

    def read(self, path: Path, max_bytes: int = 64 << 20) -> bytes | None: ...

    def mkdir(self, path: Path, owner: str | None = None) -> None: ...

    def remove(self, path: Path) -> None: ...

    def fetch(self, path: Path, dest: Path) -> bool: ...

    def tcp_open(self, host: str, port: int, timeout: float = 1.0) -> bool: ...

    def http(self, url: str, timeout: float = 5.0) -> tuple[int | None, str]: ...

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]: ...  # OSError if none


def _env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """A process's environment: ``env`` on top of a minimal one (never this process's)."""
    if env is None:
        return None
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
            **env}


class _Here:
    """What every place on THIS machine shares: files, pids, reaping."""

    root: Path
    shared_disk = True
    machine = "this host"

    def _popen(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def start(self, argv: Sequence[str], *, log: Path | None, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Proc:
        out: IO[bytes] | int = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            # a session of its own: a Ctrl-C at the terminal reaches Juice, which stops its
            # servers in order, not every server at once
            child = subprocess.Popen(self._popen(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                     env=_env(env), cwd=cwd, start_new_session=True)
        finally:
            if not isinstance(out, int):
                out.close()  # the child holds its own descriptor
        return Proc(child.pid, proc.start_time(child.pid), child)

    def exit_code(self, p: Proc) -> int | None:
        child: subprocess.Popen[bytes] | None = p.handle
        return child.poll() if child is not None else None

    def alive(self, ref: Ref) -> bool:
        return proc.alive(ref[0], ref[1])

    def adopt(self, pid: int) -> Ref | None:
        st = proc.start_time(pid)
        return (pid, st) if st is not None else None

    def terminate(self, refs: Sequence[Ref], grace_s: float = 30.0, sig: int = 15) -> None:
        pids = [pid for pid, st in refs if proc.alive(pid, st)]
        if pids:
            proc.terminate(pids, grace_s=grace_s, sig=sig)

    def release(self, p: Proc) -> None:
        """Collect the spawned process once it has exited (bounded)."""
        reap(p.handle)
        p.handle = None

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
            env: Mapping[str, str] | None = None) -> Result:
        try:
            cp = subprocess.run(self._popen(argv), input=input or "", capture_output=True, text=True,
                                timeout=timeout, env=_env(env), check=False)
        except subprocess.TimeoutExpired:
            return Result(None, "", f"timed out after {timeout:g} s: {' '.join(argv)}")
        except OSError as e:
            return Result(None, "", f"{type(e).__name__}: {e}")
        return Result(cp.returncode, cp.stdout, cp.stderr)

    def write(self, path: Path, data: str | bytes, *, mode: int = 0o644, owner: str | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(path, data.encode() if isinstance(data, str) else data, mode)
        if owner:
            shutil.chown(path, owner, owner)

    def read(self, path: Path, max_bytes: int = 64 << 20) -> bytes | None:
        try:
            with path.open("rb") as f:
                return f.read(max_bytes)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def mkdir(self, path: Path, owner: str | None = None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if owner:
            proc.run(["chown", "-R", f"{owner}:{owner}", str(path)])

    def remove(self, path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def fetch(self, path: Path, dest: Path) -> bool:
        if not path.is_file():
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        return True


def reap(child: subprocess.Popen[bytes] | None) -> None:
    """Collect a process this one spawned once it has exited (bounded: KILL after 5 s)."""
    if child is None:
        return
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=5)


def http_get(place: Place, url: str, timeout: float = 5.0) -> str:
    """The body of ``GET url`` made from inside ``place`` (the host's python3:
    ``juice.onhost.http_get``); OSError when it fails (unreachable, refused, an HTTP error)."""
    r = place.run(["python3", "-c", onhost.source("http_get"), url, str(timeout)], timeout=timeout + 10)
    if not r.ok:
        why = (r.err or r.out).strip().splitlines()
        raise OSError(why[-1] if why else f"GET {url} failed")
    return r.out


def http_request(method: str, url: str, body: bytes | None = None,
                 headers: Mapping[str, str] | None = None,
                 timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP request from where this code runs: (status, headers in lower case,
    body). OSError when there is no answer."""
    import http.client
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port or 80, timeout=timeout)
    try:
        conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body=body,
                     headers=dict(headers or {}))
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _probe_tcp(host: str, port: int, timeout: float) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def _probe_http(url: str, timeout: float) -> tuple[int | None, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read(4096).decode(errors="replace")
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except OSError as e:
        return None, f"{type(e).__name__}: {e}"


class NetnsPlace(_Here):
    """Site ``site`` of a local lab: its network namespace ``ns``; files under the lab's
    work directory, which this machine's processes share."""

    def __init__(self, site: int, ns: str, address: str, root: Path) -> None:
        self._site, self.ns, self._address, self.root = site, ns, address, root

    @property
    def site(self) -> int:
        return self._site

    @property
    def label(self) -> str:
        return f"site {self._site}"

    @property
    def address(self) -> str:
        return self._address

    def _popen(self, argv: Sequence[str]) -> list[str]:
        from juice.lab import netns

        return netns.exec_argv(self.ns, argv)

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """``fn()`` with its sockets inside the site (a client library's connection)."""
        return in_site(self.ns, fn, timeout=timeout)

    def tcp_open(self, host: str, port: int, timeout: float = 1.0) -> bool:
        return self.call(lambda: _probe_tcp(host, port, timeout), timeout + 10)

    def http(self, url: str, timeout: float = 5.0) -> tuple[int | None, str]:
        return self.call(lambda: _probe_http(url, timeout), timeout + 10)

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
        return self.call(lambda: http_request(method, url, body, headers, timeout), timeout + 5)


class ThisHost(_Here):
    """This machine outside any site (``root``: a directory of it)."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root

    site = 0
    label = "this host"
    address = "127.0.0.1"

    def tcp_open(self, host: str, port: int, timeout: float = 1.0) -> bool:
        return _probe_tcp(host, port, timeout)

    def http(self, url: str, timeout: float = 5.0) -> tuple[int | None, str]:
        return _probe_http(url, timeout)

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
        return http_request(method, url, body, headers, timeout)



class Sites(Protocol):
    """What a service uses of a lab (``LocalLab`` and ``RemoteLab`` satisfy it): its sites,
    each a place where servers run. ``Lab`` is the whole interface studies use."""

    def place(self, site: int) -> Place: ...

    def site_ip(self, site: int) -> str: ...

    @property
    def sites(self) -> range: ...

    @property
    def workdir(self) -> Path: ...  # the lab's files on THIS machine (records, openrc)


@dataclass(frozen=True)
class SampledHost:
    """A host of a lab as the resource sampler reaches it (``Lab.sampled_hosts``): its own ssh
    connection with the lab's parameters, and what tells the lab's processes there."""

    site: int
    name: str                          # "root@10.0.0.5:22": messages, the manifest, the report
    argv: Callable[[str], list[str]]   # ssh running a command there (key, known_hosts: the lab's)
    python: str                        # the host's python3
    root: str                          # the lab's directory there (the agent's agent.json)
    wan_if: str | None                 # the host's WAN interface (its link counters)


class Lab(Sites, Protocol):
    """A lab, whatever its sites are (``LocalLab``: namespaces here; ``RemoteLab``: SSH
    hosts): studies, the fault runner and the resource sampler use only this (its sites and
    places as ``Sites``, and the rest below)."""

    @property
    def name(self) -> str: ...

    @property
    def backend(self) -> str: ...      # the WAN emulation: netem | userspace | none

    @property
    def spec(self) -> LabSpec: ...     # the WAN applied now

    def set_wan(self, spec: LabSpec, progress: Callable[[str], None] = ...) -> None: ...

    def partition(self, site: int) -> None: ...   # cut ``site`` off every other site

    def heal(self, site: int | None = None) -> None: ...

    def popen(self, site: int, argv: Sequence[str], *, stdout: IO[bytes] | int | None = None,
              stderr: IO[bytes] | int | None = None, env: dict[str, str] | None = None,
              cwd: Path | None = None, stdin: IO[bytes] | int | None = None,
              ) -> subprocess.Popen[bytes]: ...  # a load driver or a worker, streamed (stdin: PIPE
    # to talk to it; default none)

    def check(self, probes: int = 10) -> CheckReport: ...

    def facts(self) -> dict[str, object]: ...

    def local_namespaces(self) -> dict[str, int] | None: ...  # netns -> site (0: the core) when
    # this machine sees the sites' processes (the resource sampler reads them); None on hosts

    def sampled_hosts(self) -> list[SampledHost] | None: ...  # the hosts whose processes the
    # resource sampler reads over ssh (juice.profile.hosts); None for namespaces here
