"""Applies the WAN inside a lab's core namespace: kernel netem or the userspace delayer.

``detect_backend`` asks the kernel: if a netem qdisc can be created, netem is used (it is
what real hosts have); otherwise ``juice-wan-delay`` (native/wan-delay, NFQUEUE) delays
each packet in userspace. Both share the partition chain, so cutting a site off works
the same way with either.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from juice.errors import LabError
from juice.lab import netns, wanrender
from juice.lab.spec import Link
from juice.lab.topology import Topology
from juice.paths import native_bin
from juice.util import atomic, proc
from juice.util.jsontypes import JSONObject

DELAYER = "juice-wan-delay"
# Per-direction overhead of the NFQUEUE round trip and timer wake-up, removed from every
# delay (measured on the 2-core CI machine: see native/README.md). JUICE_WAN_OFFSET_US
# overrides it.
DEFAULT_OFFSET_US = 100


def offset_us() -> int:
    raw = os.environ.get("JUICE_WAN_OFFSET_US", str(DEFAULT_OFFSET_US))
    try:
        return int(raw)
    except ValueError:
        from juice.errors import UserError

        raise UserError(f"JUICE_WAN_OFFSET_US: expected an integer of microseconds, got {raw!r}") from None


def netem_available(ns: str) -> bool:
    """True when the kernel can create a netem qdisc (tried on ``lo`` of ``ns``)."""
    cp = netns.run_in(ns, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "0ms"],
                      check=False)
    if cp.returncode != 0:
        return False
    netns.run_in(ns, ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return True


def detect_backend(ns: str, requested: str) -> str:
    """Resolve ``auto`` to netem or userspace; refuse netem where the kernel lacks it."""
    if requested == "userspace":
        return requested
    has_netem = netem_available(ns)
    if requested == "netem" and not has_netem:
        from juice.errors import UserError

        raise UserError("backend: this kernel has no sch_netem; use backend: userspace (or auto)")
    return "netem" if has_netem else "userspace"


class Wan:
    """The WAN of one lab: rules in its core namespace plus, for userspace, the delayer."""

    def __init__(self, topo: Topology, backend: str, workdir: Path) -> None:
        self.topo = topo
        self.backend = backend
        self.workdir = workdir

    @property
    def table_path(self) -> Path:
        return self.workdir / "wan-table.json"

    @property
    def stats_path(self) -> Path:
        return self.workdir / "wan-stats.json"

    def install(self, links: dict[tuple[int, int], Link], partitioned: list[int]) -> int:
        """First application. Returns the delayer's pid (0 for netem)."""
        core = self.topo.core_ns
        pid = 0
        if self.backend == "userspace":
            pid = self._start_delayer(links)
        else:
            for cmd in wanrender.netem_setup(self.topo, links):
                netns.run_in(core, cmd)
        self._restore_chains(links, partitioned)
        for cmd in wanrender.iptables_hooks():
            netns.run_in(core, cmd)
        return pid

    def update(self, links: dict[tuple[int, int], Link], partitioned: list[int],
               daemon_pid: int) -> None:
        """Change delays/partitions at runtime without dropping traffic in flight."""
        if self.backend == "userspace":
            atomic.write_json(self.table_path, wanrender.delayer_table(self.topo, links, offset_us()))
            try:
                os.kill(daemon_pid, signal.SIGHUP)
            except ProcessLookupError:
                raise LabError("the WAN delayer is not running; `juice lab down` then `up`") from None
        else:
            for cmd in wanrender.netem_update(self.topo, links):
                netns.run_in(self.topo.core_ns, cmd)
        self._restore_chains(links, partitioned)

    def _restore_chains(self, links: dict[tuple[int, int], Link], partitioned: list[int]) -> None:
        doc = wanrender.iptables_chains(self.topo, links, partitioned,
                                        userspace=self.backend == "userspace")
        netns.run_in(self.topo.core_ns, ["iptables-restore", "--noflush"], input_text=doc)

    def _start_delayer(self, links: dict[tuple[int, int], Link]) -> int:
        binary = native_bin(DELAYER)
        if not binary.exists():
            raise LabError(f"{binary} is missing: run scripts/setup.sh (it builds native helpers)")
        atomic.write_json(self.table_path, wanrender.delayer_table(self.topo, links, offset_us()))
        pidfile = self.workdir / "wan-delay.pid"
        pidfile.unlink(missing_ok=True)
        log = open(self.workdir / "wan-delay.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            child = subprocess.Popen(
                netns.exec_argv(self.topo.core_ns, [str(binary), "--table", str(self.table_path),
                                                    "--stats", str(self.stats_path),
                                                    "--pidfile", str(pidfile)]),
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if child.poll() is not None:
                tail = (self.workdir / "wan-delay.log").read_text().strip().splitlines()[-1:]
                raise LabError(f"{DELAYER} exited with {child.returncode}: {' '.join(tail)}")
            if pidfile.exists() and pidfile.read_text().strip():
                return int(pidfile.read_text().strip())
            time.sleep(0.02)
        proc.terminate([child.pid])
        raise LabError(f"{DELAYER} did not start within 10 s (see {self.workdir}/wan-delay.log)")

    def stats(self) -> JSONObject | None:
        """The delayer's last stats (queue depth, drops...), or None for netem/absent."""
        try:
            data: JSONObject = json.loads(self.stats_path.read_text())
            return data
        except (FileNotFoundError, json.JSONDecodeError):
            return None
