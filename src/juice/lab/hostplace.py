"""An SSH host as a place (``juice.lab.place.Place``): every operation is one request to the
host's agent (``juice.hosts.agent``) over the lab's ssh connection to it.

    place = lab.place(2)                 # RemoteLab: site 2 = the second host
    place.write(place.root / "s2/db/my.cnf", text, owner="mysql")
    p = place.start([...], log=place.root / "s2/db/stdout.log")

Paths are the host's, under the lab's directory there (``/var/tmp/juice-host/<lab>``); the
agent refuses any other. Processes are recorded by the agent (pid + start time) as they
start, so it stops them when the lab ends or Juice dies; ``adopt`` records a pid read from a
server's pid file. Probes (TCP, HTTP) are made FROM the host, as a client in that site would.
The host does not see this machine's files (``shared_disk`` False): what a local site shares
through the disk (a key repository, a pre-seeded datadir) travels through ``write``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path

from juice.errors import LabError
from juice.hosts.session import Proc as AgentProc
from juice.hosts.session import Session
from juice.lab.place import Proc, Ref, Result


class HostPlace:
    """Site ``session.site`` on its host (see the module doc)."""

    shared_disk = False

    def __init__(self, session: Session, root: Path, address: str) -> None:
        self.session, self.root, self._address = session, root, address

    @property
    def site(self) -> int:
        return self.session.site

    @property
    def label(self) -> str:
        return self.session.name  # "site 2 (root@h2:22)"

    @property
    def address(self) -> str:
        return self._address

    @property
    def machine(self) -> str:
        return self.session.name

    def rel(self, path: Path) -> str:
        """``path`` relative to the lab's directory on the host (LabError outside it)."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            raise LabError(f"{self.label}: {path} is outside the lab's directory {self.root}") from None

    # ---- processes ---------------------------------------------------------------------------
    def start(self, argv: Sequence[str], *, log: Path | None, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Proc:
        p = self.session.spawn(argv, log=self.rel(log) if log is not None else "run/discarded.log",
                               env=dict(env) if env is not None else {},
                               cwd=self.rel(cwd) if cwd is not None else None)
        return Proc(p.pid, p.start, p)

    def exit_code(self, p: Proc) -> int | None:
        st = self.session.call("status", procs=[[p.pid, p.start]])["procs"][str(p.pid)]
        if st["alive"]:
            return None
        return int(st["code"]) if st.get("code") is not None else -1

    def alive(self, ref: Ref) -> bool:
        return bool(self.session.call("status", procs=[list(ref)])["procs"][str(ref[0])]["alive"])

    def adopt(self, pid: int) -> Ref | None:
        try:
            msg = self.session.call("adopt", pid=pid)
        except LabError:
            return None  # gone already
        return (int(msg["pid"]), msg.get("start"))

    def terminate(self, refs: Sequence[Ref], grace_s: float = 30.0, sig: int = 15) -> None:
        if refs:
            self.session.kill([AgentProc(self.site, pid, st) for pid, st in refs], grace_s=grace_s, sig=sig)

    def release(self, p: Proc) -> None:
        p.handle = None  # the agent reaps its children itself

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
            env: Mapping[str, str] | None = None) -> Result:
        cmd: dict[str, object] = {"argv": list(argv), "timeout": timeout, "input": input or ""}
        if env is not None:
            cmd["env"] = dict(env)
        r = self.session.run([cmd], timeout=timeout, keep_going=True)[0]
        return Result(r["rc"], str(r["out"]), str(r["err"]))

    # ---- files -------------------------------------------------------------------------------
    def write(self, path: Path, data: str | bytes, *, mode: int = 0o644, owner: str | None = None) -> None:
        self.session.put(self.rel(path), data, mode=mode)
        if owner:
            self._chown(path, owner)

    def read(self, path: Path, max_bytes: int = 64 << 20) -> bytes | None:
        return self.session.get(self.rel(path), max_bytes=max_bytes)

    def mkdir(self, path: Path, owner: str | None = None) -> None:
        self.session.call("mkdir", path=self.rel(path), owner=f"{owner}:{owner}" if owner else None)

    def remove(self, path: Path) -> None:
        self.rel(path)  # inside the lab's directory only
        self.run(["rm", "-rf", "--", str(path)], timeout=120)

    def fetch(self, path: Path, dest: Path) -> bool:
        data = self.read(path)
        if data is None:
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        return True

    def _chown(self, path: Path, owner: str) -> None:
        r = self.run(["chown", f"{owner}:{owner}", str(path)])
        if not r.ok:
            raise LabError(f"{self.label}: chown {owner} {path}: {r.err.strip() or r.out.strip()}")

    # ---- probes ------------------------------------------------------------------------------
    def tcp_open(self, host: str, port: int, timeout: float = 1.0) -> bool:
        return self.session.tcp_ms(host, port, n=1, timeout=timeout) is not None

    def http(self, url: str, timeout: float = 5.0) -> tuple[int | None, str]:
        return self.session.http_status(url, timeout)

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
        msg = self.session.call("request", timeout=timeout + 10, method=method, url=url,
                                body=base64.b64encode(body).decode() if body is not None else None,
                                headers=dict(headers or {}), timeout_s=timeout)
        if msg.get("status") is None:
            raise OSError(f"{self.label}: {method} {url}: {msg.get('error')}")
        return int(msg["status"]), {str(k): str(v) for k, v in msg["headers"].items()}, \
            base64.b64decode(msg["body"])
