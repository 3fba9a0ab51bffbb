"""One SSH session per host, to the host agent (``juice.hosts.agent``), and phases across hosts.

    hosts = Hosts(lab="r1a2b3", specs={1: host1, 2: host2}, tmp=private_dir)
    hosts.open(progress)                          # ssh + agent on every host, in parallel
    hosts.each("mariadb start", lambda site, s: s.spawn([...], log="s1/mariadb/out.log"))
    hosts.close()                                 # every agent stops its processes, undoes, rm -r

One ssh connection per host stays open for the lab's life (BatchMode: a key, never a
prompt; host keys accepted on first use into a private known_hosts, fingerprint recorded).
A request is one JSON line on that connection: a phase costs one round trip per host, the
hosts in parallel, not an ssh handshake per command. When Juice dies the connection closes
and each agent cleans its host up by itself.
"""

from __future__ import annotations

import base64
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from juice.errors import LabError
from juice.hosts.ssh import boot_command, fingerprint, ssh_argv

T = TypeVar("T")
Progress = Callable[[str], None]

CONNECT_TIMEOUT_S = 15
HELLO_TIMEOUT_S = 60.0
BYE_TIMEOUT_S = 120.0


def agent_script(lab: str) -> bytes:
    """The agent's source as shipped: ``JUICE_LAB`` set first."""
    src = (Path(__file__).parent / "agent.py").read_text()
    head = "from __future__ import annotations\n"
    return src.replace(head, f"{head}JUICE_LAB = {lab!r}\n", 1).encode()


@dataclass(frozen=True)
class Proc:
    """A process the agent started on a host (stopped by this pid + start time)."""

    site: int
    pid: int
    start: int | None

    def ref(self) -> list[int | None]:
        return [self.pid, self.start]

# what a quick request (a TCP or HTTP probe) is allowed beyond its own timeout: the agent answers
# requests concurrently, but a host loaded by a bring-up can be slow to schedule it
QUEUED_S = 30.0


class RemoteError(LabError):
    """A request failed on a host (the message names the site, the host and the operation)."""


class Session:
    """The connection to one host's agent."""

    def __init__(self, site: int, host: Any, lab: str, tmp: Path, ssh: str = "ssh") -> None:
        self.site, self.host, self.lab = site, host, lab
        self.known_hosts = tmp / f"known_hosts-{site}"
        self.stderr_path = tmp / f"ssh-{site}.err"
        self.ssh = ssh
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: dict[str, Any] = {}
        self.host_key: str | None = None
        self._ids = 0
        self._lock = threading.Lock()
        self._pending: dict[int, queue.Queue[dict[str, Any] | None]] = {}
        self._reader: threading.Thread | None = None
        self._dead: str | None = None

    @property
    def name(self) -> str:
        return f"site {self.site} ({self.host.user}@{self.host.address}:{self.host.port})"

    def argv(self, command: str) -> list[str]:
        return ssh_argv(self.host, self.known_hosts, command, self.ssh, address=self.host.address,
                        connect_timeout=CONNECT_TIMEOUT_S, alive_count_max=6)

    def open(self) -> dict[str, Any]:
        script = agent_script(self.lab)
        cmd = boot_command(script).replace("python3 ", f"{self.host.python} ", 1)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(script)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,),
                                        name=f"juice-agent-{self.site}", daemon=True)
        self._reader.start()
        self.hello = self.call("hello", timeout=HELLO_TIMEOUT_S)
        self.host_key = fingerprint(self.known_hosts)
        return self.hello

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # a login script's chatter
            if isinstance(msg, dict) and isinstance(msg.get("id"), int):
                q = self._pending.get(msg["id"])
                if q is not None:
                    q.put(msg)
        self._dead = self._stderr() or "the connection closed"
        for q in list(self._pending.values()):
            q.put(None)

    def _stderr(self) -> str:
        try:
            lines = [x for x in self.stderr_path.read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            return ""
        return "; ".join(lines[-3:])[:400]

    def call(self, op: str, timeout: float = 60.0, **req: Any) -> dict[str, Any]:
        """One request; its answer (RemoteError when it failed, timed out or ssh is gone)."""
        if self.proc is None or self.proc.stdin is None:
            raise RemoteError(f"{self.name}: not connected")
        q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        with self._lock:
            self._ids += 1
            rid = self._ids
            self._pending[rid] = q
            try:
                self.proc.stdin.write((json.dumps({"id": rid, "op": op, **req}) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self._pending.pop(rid, None)
                why = self._dead or self._stderr()
                raise RemoteError(f"{self.name}: {op}: ssh is gone ({why})") from None
        try:
            msg = q.get(timeout=timeout) if self._dead is None or not q.empty() else None
        except queue.Empty:
            raise RemoteError(f"{self.name}: {op}: no answer after {timeout:g} s") from None
        finally:
            self._pending.pop(rid, None)
        if msg is None:
            raise RemoteError(f"{self.name}: {op}: ssh is gone ({self._dead})")
        if not msg.get("ok"):
            raise RemoteError(f"{self.name}: {op}: {msg.get('error')}")
        return msg

    # ---- conveniences ------------------------------------------------------------------------
    def run(self, cmds: Sequence[Sequence[str] | Mapping[str, Any]], *, timeout: float = 120.0,
            keep_going: bool = False, what: str = "") -> list[dict[str, Any]]:
        """Commands in order on the host; RemoteError naming the first that failed."""
        items = [dict(c) if isinstance(c, Mapping) else {"argv": list(c)} for c in cmds]
        for c in items:
            c.setdefault("timeout", timeout)
        total = sum(float(c["timeout"]) for c in items) + 30
        res: list[dict[str, Any]] = self.call("exec", timeout=total, cmds=items,
                                              keep_going=keep_going)["results"]
        if not keep_going:
            for c, r in zip(items, res, strict=False):
                if r["rc"] != 0:
                    detail = (r["err"] or r["out"]).strip().splitlines()
                    raise RemoteError(f"{self.name}: {what + ': ' if what else ''}`{' '.join(c['argv'])}` "
                                      f"failed ({'rc ' + str(r['rc']) if r['rc'] is not None else 'no exit'})"
                                      f": {detail[-1] if detail else 'no output'}")
        return res

    def put(self, rel: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self.call("put", timeout=120, path=rel, data=base64.b64encode(raw).decode(), mode=mode)

    def get(self, rel: str, max_bytes: int = 64 * 1024 * 1024) -> bytes | None:
        msg = self.call("get", timeout=300, path=rel, max=max_bytes)
        return None if msg.get("missing") else base64.b64decode(msg["data"])

    def spawn(self, argv: Sequence[str], *, log: str, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> Proc:
        msg = self.call("spawn", argv=list(argv), log=log, cwd=cwd,
                        env=dict(env) if env is not None else None)
        return Proc(self.site, int(msg["pid"]), msg.get("start"))

    def alive(self, p: Proc) -> bool:
        return bool(self.call("status", procs=[p.ref()])["procs"][str(p.pid)]["alive"])

    def kill(self, procs: Sequence[Proc], grace_s: float = 30.0, sig: int = 15) -> None:
        if procs:
            self.call("kill", timeout=grace_s + 30, procs=[p.ref() for p in procs], sig=sig, grace_s=grace_s)

    def tcp_ms(self, host: str, port: int, n: int = 1, timeout: float = 2.0) -> list[float] | None:
        # the agent answers one request at a time: a probe may wait behind a long one (a tool
        # run by another bring-up step on this host), so the wait allows for that
        msg = self.call("tcp", timeout=n * (timeout + 1) + QUEUED_S, host=host, port=port, n=n,
                        timeout_s=timeout)
        ms = [float(x) for x in msg.get("ms") or []]
        return ms if len(ms) == n else None  # a failed connect ends the series (its "error" says why)

    def http_status(self, url: str, timeout: float = 5.0) -> tuple[int | None, str]:
        msg = self.call("http", timeout=timeout + QUEUED_S, url=url, timeout_s=timeout)
        return msg.get("status"), str(msg.get("body") or msg.get("error") or "")

    def close(self) -> None:
        """``bye`` (the agent stops its processes, undoes, removes its directory), then ssh ends."""
        if self.proc is None:
            return
        try:
            if self._dead is None:
                self.call("bye", timeout=BYE_TIMEOUT_S)
        except RemoteError:
            pass
        finally:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class Hosts:
    """The sessions of a lab's hosts (site k = the k-th host) and phases across them."""

    def __init__(self, lab: str, specs: Mapping[int, Any], tmp: Path, ssh: str = "ssh") -> None:
        self.lab = lab
        self.sessions = {site: Session(site, h, lab, tmp, ssh) for site, h in specs.items()}

    def __getitem__(self, site: int) -> Session:
        return self.sessions[site]

    def open(self, progress: Progress) -> None:
        t0 = time.monotonic()
        try:
            self.each("connect", lambda _s, sess: sess.open())
        except BaseException:
            self.close()
            raise
        for s in self.sessions.values():
            if s.hello.get("swept"):
                progress(f"{s.name}: removed what crashed runs left: {', '.join(s.hello['swept'])}")
        progress(f"{len(self.sessions)} host(s) connected in {time.monotonic() - t0:.1f} s "
                 f"(one ssh session and agent each)")

    def each(self, phase: str, fn: Callable[[int, Session], T],
             sites: Sequence[int] | None = None) -> dict[int, T]:
        """``fn(site, session)`` on every host (or ``sites``) at once; LabError naming every
        host that failed."""
        chosen = list(sites) if sites is not None else sorted(self.sessions)
        out: dict[int, T] = {}
        errors: list[str] = []
        with ThreadPoolExecutor(max_workers=max(1, min(32, len(chosen)))) as ex:
            futs = {ex.submit(fn, s, self.sessions[s]): s for s in chosen}
            for f, s in futs.items():
                try:
                    out[s] = f.result()
                except RemoteError as e:
                    errors.append(str(e))
                except Exception as e:
                    errors.append(f"{self.sessions[s].name}: {type(e).__name__}: {e}")
        if errors:
            raise RemoteError(f"{phase}: " + " | ".join(errors))
        return out

    def close(self) -> None:
        with ThreadPoolExecutor(max_workers=max(1, len(self.sessions))) as ex:
            list(ex.map(lambda s: s.close(), self.sessions.values()))

    def facts(self) -> list[dict[str, Any]]:
        return [{"site": s.site, "address": s.host.address, "port": s.host.port, "user": s.host.user,
                 "hostname": s.hello.get("hostname"), "kernel": s.hello.get("kernel"),
                 "python": s.hello.get("python"), "nproc": s.hello.get("nproc"), "host_key": s.host_key}
                for s in self.sessions.values()]
