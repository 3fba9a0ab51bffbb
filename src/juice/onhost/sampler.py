"""The resource sampler that runs ON an SSH host: standard library and ``juice.onhost.procfs``
only (Python >= 3.7 there; Juice need not be installed). ``juice.profile.ssh`` (an existing
cloud's servers, by command-line patterns) and ``juice.profile.hosts`` (what a lab's agent
started) ship this module and ``procfs`` with ``juice.hosts.bundle`` and run ``main``.

Protocol: JSON lines out (``{"ready", "python"}``; ``{"pong"}`` per ``ping``; after ``go``,
per tick ``{"n": [...]}`` for newly named processes and ``{"t", "s": rows}`` (+ ``"l"``: the
WAN interface's counters for the lab sampler); ``{"e"}`` for the first errors; ``{"end"}``
with the sampler's own ``cpu_s`` at the end); lines in on stdin (``ping``, ``go``), whose
closing is the stop signal. A row is ``[pid, cpu_user_s, cpu_system_s, rss_bytes, threads,
fds]``.
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
import time
from typing import Any

from juice.onhost import procfs

MAX_ERRORS = 5  # errors sent back (all are counted)


class Channel:
    """JSON lines to stdout, lines from fd 0."""

    def __init__(self, fd: int = 0) -> None:
        self.fd, self.buf, self.errors = fd, b"", 0

    def out(self, obj: Any) -> None:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def error(self, text: str) -> None:
        self.errors += 1
        if self.errors <= MAX_ERRORS:
            self.out({"e": text})

    def lines(self, timeout: float) -> list[bytes] | None:
        """Lines that arrived on stdin within ``timeout`` s; None at EOF."""
        r = select.select([self.fd], [], [], max(0.0, timeout))[0]
        if not r:
            return []
        data = os.read(self.fd, 4096)
        if not data:
            return None
        *done, self.buf = (self.buf + data).split(b"\n")
        return [d.strip() for d in done]


def row(pid: int, st: procfs.Stat, fds: int) -> list[Any]:
    return [pid, st.user_s, st.system_s, st.rss_bytes, st.threads, fds]


# ---- by command-line patterns (an existing cloud's servers: ``juice.profile.ssh``) ----------

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


def patterns(specs: list[str]) -> list[tuple[str, re.Pattern[str]]]:
    """``name=regex`` (or a bare regex: the component is then the match's last path part)."""
    out = []
    for p in specs:
        name, sep, rx = p.partition("=")
        if not sep or not NAME.fullmatch(name):
            name, rx = "", p
        out.append((name, re.compile(rx)))
    return out


def component(pats: list[tuple[str, re.Pattern[str]]], cmd: str) -> str | None:
    """The component of a command line (its arguments joined by spaces), None for no pattern."""
    for name, rx in pats:
        m = rx.search(cmd) if cmd else None
        if m:
            return name or m.group(0).strip().rstrip("/").split("/")[-1] or "?"
    return None


class PatternSampler:
    """Every process whose command line matches one of the patterns."""

    def __init__(self, cfg: dict[str, Any], ch: Channel) -> None:
        self.pats, self.ch, self.me = patterns(cfg["patterns"]), ch, os.getpid()
        self.known: dict[int, tuple[tuple[int, str], str | None]] = {}

    def sample(self) -> None:
        new: list[list[Any]] = []
        rows: list[list[Any]] = []
        alive = set()
        for pid in procfs.pids():
            if pid == self.me:
                continue
            alive.add(pid)
            st = procfs.read_stat(pid)
            if st is None or st.state in ("Z", "X"):
                continue
            k = self.known.get(pid)
            if k is None or k[0] != (st.start, st.comm):  # new, or its pid reused, or it exec'd
                name = component(self.pats, " ".join(procfs.read_cmdline(pid)).strip())
                k = self.known[pid] = ((st.start, st.comm), name)
                if name is not None:
                    new.append([pid, name])
            if k[1] is not None:
                rows.append(row(pid, st, procfs.fd_count(pid)))
        for pid in set(self.known) - alive:
            del self.known[pid]
        if new:
            self.ch.out({"n": new})
        self.ch.out({"t": time.time(), "s": rows})


# ---- what a lab's agent started (``juice.profile.hosts``) ---------------------------------

class _Known:
    __slots__ = ("comm", "ppid", "st", "start", "why")

    def __init__(self, st: procfs.Stat, why: str) -> None:
        self.start, self.comm, self.ppid, self.why, self.st = st.start, st.comm, st.ppid, why, st


class LabSampler:
    """The host agent, every process recorded in its ``<root>/agent.json`` and their
    descendants, and the processes working in ``<root>`` in the sampler's mount namespace;
    plus the counters of the WAN interface ``wan_if``."""

    def __init__(self, cfg: dict[str, Any], ch: Channel) -> None:
        self.root, self.wan, self.max_args = cfg["root"], cfg["wan_if"], int(cfg.get("max_args", 24))
        self.state = self.root + "/agent.json"
        self.ch, self.me = ch, os.getpid()
        self.mnt = procfs.ns_link(self.me, "mnt")
        self.known: dict[int, _Known] = {}
        self.mtime: int | None = None  # agent.json's
        self.agent: tuple[int, Any] | None = None  # (pid, start)
        self.recorded: set[tuple[int, Any]] = set()
        self.netfd: int | None = None

    def read_roots(self) -> bool:
        """True when agent.json changed (then every process not selected is looked at again)."""
        try:
            mt = os.stat(self.state).st_mtime_ns
            if mt == self.mtime:
                return False
            with open(self.state) as f:
                st = json.load(f)
            self.agent = (int(st["agent"][0]), st["agent"][1])
            self.recorded = {(int(p), s) for p, s in st["procs"]}
            self.mtime = mt
            return True
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return False

    def works_here(self, pid: int) -> bool:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return False
        inside = cwd == self.root or cwd.startswith(self.root + "/")
        return inside and procfs.ns_link(pid, "mnt") == self.mnt

    def why(self, pid: int, k: _Known, fresh: bool) -> str:
        """Why ``pid`` is sampled (``agent``, ``recorded``, ``child``, ``cwd``), "" when not."""
        if self.agent is not None and pid == self.agent[0] and self.agent[1] in (None, k.start):
            return "agent"
        if (pid, k.start) in self.recorded or (pid, None) in self.recorded:
            return "recorded"
        p = self.known.get(k.ppid)
        if p is not None and p.why:
            return "child"
        if fresh and self.works_here(pid):
            return "cwd"
        return ""

    def argv(self, pid: int) -> list[str]:
        return [a[:200] for a in procfs.read_cmdline(pid, 8192)][:self.max_args]

    def link(self) -> list[int] | None:
        """The WAN interface's ``[rx_bytes, tx_bytes, rx_packets, tx_packets]``."""
        if not self.wan:
            return None
        if self.netfd is None:
            self.netfd = os.open("/proc/self/net/dev", os.O_RDONLY)
        d = procfs.parse_net_dev(os.pread(self.netfd, 1 << 18, 0)).get(self.wan)
        return None if d is None else [d.rx_bytes, d.tx_bytes, d.rx_packets, d.tx_packets]

    def sample(self) -> None:
        changed = self.read_roots()
        fresh, alive = set(), set()
        for pid in procfs.pids():
            if pid == self.me:
                continue
            st = procfs.read_stat(pid)
            if st is None or st.state in ("Z", "X"):
                continue
            alive.add(pid)
            k = self.known.get(pid)
            if k is None or k.start != st.start or k.comm != st.comm:  # new, pid reused, exec'd
                kept = k.why if k is not None and k.start == st.start else ""
                self.known[pid] = _Known(st, kept)
                fresh.add(pid)
            else:
                k.ppid, k.st = st.ppid, st
        for pid in set(self.known) - alive:
            del self.known[pid]
        look = fresh | ({p for p, k in self.known.items() if not k.why} if changed else set())
        new = []
        for pid in sorted(look, key=lambda p: self.known[p].start):  # parents before children
            k = self.known[pid]
            was = k.why
            if not was:
                k.why = self.why(pid, k, pid in fresh)
            if k.why and (pid in fresh or not was):
                new.append([pid, k.ppid, k.start, k.comm, self.argv(pid), k.why])
        rows = [row(pid, k.st, procfs.fd_count(pid)) for pid, k in self.known.items() if k.why]
        if new:
            self.ch.out({"n": new})
        msg: dict[str, Any] = {"t": time.time(), "s": rows}
        try:
            ln = self.link()
            if ln is not None:
                msg["l"] = ln
        except (OSError, ValueError, IndexError) as e:
            self.ch.error(f"{self.wan}: {type(e).__name__}: {e}")
        self.ch.out(msg)


SAMPLERS = {"patterns": PatternSampler, "lab": LabSampler}


# ---- the program: clock probes, the loop, the end ---------------------------------------------

def run(cfg: dict[str, Any], sampler: Any, ch: Channel) -> None:
    ch.out({"ready": time.time(), "python": sys.version.split()[0]})
    end = time.monotonic() + 60
    while True:
        got = ch.lines(end - time.monotonic())
        if got is None or time.monotonic() > end:
            return
        if b"ping" in got:
            ch.out({"pong": time.time()})
        if b"go" in got:
            break
    nxt = start = time.monotonic()
    while True:
        try:
            sampler.sample()
        except (OSError, ValueError, IndexError) as e:
            ch.error(f"{type(e).__name__}: {e}")
        now = time.monotonic()
        nxt = max(nxt + cfg["interval_s"], now)
        if now - start >= cfg["max_s"]:
            ch.out({"end": "max_s"})
            return
        while now < nxt:
            if ch.lines(nxt - now) is None:
                sampler.sample()
                ch.out({"end": "stdin closed", "cpu_s": time.process_time()})
                return
            now = time.monotonic()


def main(cfg_json: str) -> None:
    """The program on the host: ``cfg`` (JSON) names the sampler (``kind``) and its settings."""
    cfg = json.loads(cfg_json)
    ch = Channel()
    try:
        run(cfg, SAMPLERS[cfg["kind"]](cfg, ch), ch)
    except (BrokenPipeError, KeyboardInterrupt):
        pass
