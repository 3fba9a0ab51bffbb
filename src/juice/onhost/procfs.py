"""The /proc readers of every resource sampler, written once: pure parsers (testable on
captured text) and the reads around them. Standard library only and Python >= 3.7: the local
sampler (``juice.profile.sampler``) imports it, and the samplers that run on SSH hosts
(``juice.onhost.sampler``) are shipped with it (``juice.hosts.bundle``).

    parse_stat(b"1234 (mariadbd) S 1 ...")   # -> Stat(user_s, system_s, threads, rss_bytes, ...)
    read_stat(pid), read_cmdline(pid), fd_count(pid), pids()   # None / [] / -1 when it is gone
    parse_net_dev(text)                       # -> {"s1": NetDev(rx_bytes, rx_packets, ...), ...}
    site_links(devs)                          # -> {1: NetDev as seen FROM site 1 (in = to the site)}
    component_of(argv)                        # -> "load-driver", "wan-delay", "memcached", ...

``/proc/<pid>/stat``: ``utime``/``stime`` (fields 14, 15) are clock ticks (``SC_CLK_TCK``,
100 per second on Linux: a 10 ms resolution) summed over every thread of the process, since
it started; ``num_threads`` (20); ``starttime`` (22, ticks since boot: with the pid it names
one process); ``rss`` (24, pages). The command name (field 2) may hold spaces and
parentheses, so the fields are split after the LAST ``)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Stat:
    """What one read of ``/proc/<pid>/stat`` says. Times are cumulative CPU seconds."""

    pid: int
    comm: str
    state: str
    ppid: int
    user_s: float
    system_s: float
    threads: int
    start: int  # kernel start time, clock ticks since boot
    rss_bytes: int


def parse_stat(raw: bytes | str, clk_tck: int = CLK_TCK, page_size: int = PAGE_SIZE) -> Stat:
    """One ``/proc/<pid>/stat`` line. ValueError when it is not one."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    head, sep, tail = text.rpartition(")")
    if not sep or "(" not in head:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:60]!r}")
    pid_s, _, comm = head.partition("(")
    f = tail.split()
    if len(f) < 22:
        raise ValueError(f"short /proc/<pid>/stat line ({len(f) + 2} fields)")
    # f[0] is field 3 (state): field n is f[n - 3]
    return Stat(pid=int(pid_s), comm=comm, state=f[0], ppid=int(f[1]),
                user_s=int(f[11]) / clk_tck, system_s=int(f[12]) / clk_tck,
                threads=int(f[17]), start=int(f[19]), rss_bytes=int(f[21]) * page_size)


@dataclass(frozen=True)
class NetDev:
    """Cumulative counters of one interface (since it was created)."""

    rx_bytes: int
    rx_packets: int
    tx_bytes: int
    tx_packets: int


def parse_net_dev(raw: bytes | str) -> dict[str, NetDev]:
    """``/proc/net/dev`` (or ``/proc/<pid>/net/dev``): interface -> counters."""
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    out: dict[str, NetDev] = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        f = rest.split()
        if len(f) < 10:
            continue
        out[name.strip()] = NetDev(rx_bytes=int(f[0]), rx_packets=int(f[1]),
                                   tx_bytes=int(f[8]), tx_packets=int(f[9]))
    return out


_SITE_IFACE = re.compile(r"^s(\d+)$")


def site_links(core_devs: dict[str, NetDev]) -> dict[int, NetDev]:
    """The core namespace's veths ``s<k>`` turned into site k's view: what the core SENDS on
    ``s<k>`` is what site k RECEIVES (rx = into the site), and the reverse."""
    out: dict[int, NetDev] = {}
    for name, d in core_devs.items():
        m = _SITE_IFACE.match(name)
        if m:
            out[int(m.group(1))] = NetDev(rx_bytes=d.tx_bytes, rx_packets=d.tx_packets,
                                          tx_bytes=d.rx_bytes, tx_packets=d.rx_packets)
    return out


_PYTHON = re.compile(r"^python[0-9.]*$")
_KNOWN = {"juice.driver": "load-driver", "juice-wan-delay": "wan-delay"}


def component_of(argv: Sequence[str], comm: str = "") -> str:
    """A component name for a process Juice did not record as a server, from its command
    line: ``load-driver``, ``wan-delay``, ``python -m juice.studies.x.worker`` -> ``x.worker``,
    ``/usr/bin/memcached ...`` -> ``memcached``; ``comm`` (the kernel's name) when the
    command line is empty (a kernel thread, a zombie)."""
    if not argv:
        return comm or "?"
    for a in argv:
        for key, name in _KNOWN.items():
            if key in a:
                return name
    exe = os.path.basename(argv[0])
    if _PYTHON.match(exe):
        rest = list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
            rest.pop(0)
        if rest and rest[0] == "-c":
            return "python"
        if len(rest) >= 2 and rest[0] == "-m":
            mod = rest[1]
            for prefix in ("juice.studies.", "juice."):
                if mod.startswith(prefix):
                    return mod[len(prefix):]
            return mod
        if rest:
            return os.path.basename(rest[0]).removesuffix(".py")
    return exe or comm or "?"


def parse_cmdline(raw: bytes) -> list[str]:
    """``/proc/<pid>/cmdline``: NUL-separated arguments."""
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def ns_inode(link: str) -> int | None:
    """``net:[4026532177]`` (a readlink of ``/proc/<pid>/ns/net``) -> 4026532177."""
    if link.startswith("net:[") and link.endswith("]"):
        try:
            return int(link[5:-1])
        except ValueError:
            return None
    return None


# ---- reads (a process may be gone between two of them: never raised) -------------------------

def pids() -> list[int]:
    """Every process id in /proc."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def read_stat(pid: int, clk_tck: int = CLK_TCK, page_size: int = PAGE_SIZE) -> Stat | None:
    """``/proc/<pid>/stat`` parsed; None when the process is gone or the line unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return parse_stat(f.read(), clk_tck, page_size)
    except (OSError, ValueError):
        return None


def read_cmdline(pid: int, max_bytes: int = -1) -> list[str]:
    """``/proc/<pid>/cmdline`` (its first ``max_bytes``); [] when gone (or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return parse_cmdline(f.read(max_bytes))
    except OSError:
        return []


def fd_count(pid: int) -> int:
    """Open fds of ``pid``: the size of /proc/<pid>/fd (Linux >= 6.2), else a listing; -1 gone
    (or not readable: fds need the same user or root)."""
    try:
        n = os.stat(f"/proc/{pid}/fd").st_size
        return n if n > 0 else len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def ns_link(pid: int, kind: str) -> str | None:
    """``readlink /proc/<pid>/ns/<kind>`` (``mnt:[4026531841]``); None when gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None
