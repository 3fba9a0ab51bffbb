"""Resource profiles of a lab on SSH hosts: every process the lab runs there, per host.

``juice.profile.sampler.start`` picks this when the lab says its processes are on hosts
(``Lab.sampled_hosts()``; the local sampler reads this machine's /proc instead)::

    prof = HostSampler(lab.sampled_hosts(), out_dir, interval_s, records).start()
    ... the run ...
    summary = prof.stop()            # writes <run>/profile.parquet; the manifest's "profile"

Per host, one ``ssh`` process (the lab's ssh parameters: its key, its known_hosts; its own
connection, not the agent's, so sampling never waits behind an agent request and never
delays one) runs a stdlib-only ``python3`` sampler sent on stdin (``juice.onhost.sampler``'s
``LabSampler``): the SSH profiler's (``juice.profile.ssh``: the same transport, clock probes,
stop on stdin's closing, ``max_s``) with another choice of processes. Which processes, on the
host, re-decided when one starts or execs:

- the host agent itself (component ``juice-agent``) and every process recorded in its state
  file ``<root>/agent.json`` (what it spawned or adopted, pid + start time), and every
  descendant of those (a gunicorn master's workers, the commands it runs);
- any process whose working directory is the lab's directory there and whose mount namespace
  is the sampler's own: the load drivers (``RemoteLab.popen``: ``cd <root> && exec ...``).

Named as locally (``juice.profile.sampler``): the ``kind`` of the deployment's
``ServerRecord`` for that (site, pid) with the same start time, or of its nearest recorded
ancestor, else from the command line (``procfs.component_of``: ``load-driver``,
``wan-delay``, ``memcached``...). Metrics as locally: ``cpu_user_s``, ``cpu_system_s``
(cumulative), ``rss_bytes``, ``threads``, ``fds``; per host the counters of its WAN
interface as the site's ``link`` rows (in = received by the host; on hosts whose WAN is also
the control network they include ssh, this sampler's stream among it). No database counters.

Clock: each host's offset is measured once at start (``PINGS`` round trips, the one of least
RTT: offset = host time - the midpoint of Juice's clock around it); rows are on Juice's
clock (the host's ``time.time()`` minus its offset), within +- RTT/2. The summary has per
host ``{"offset_s", "rtt_s"}`` (``clock``), and the remote sampler's own CPU seconds. Errors
are counted and the first few kept, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juice.hosts.ssh import boot_command
from juice.lab.place import SampledHost
from juice.onhost import procfs
from juice.profile.ssh import MAX_S, SshProfiler, _Host, program
from juice.profile.table import (
    CUMULATIVE,
    LINK_METRICS,
    METRIC_INDEX,
    PROCESS_METRICS,
    PROFILE_TABLE,
    PROFILE_VERSION,
)
from juice.services.base import ServerRecord

AGENT = "juice-agent"
LINK = "link"
MAX_ARGS = 24

def remote_script(host: SampledHost, interval_s: float, max_s: float) -> bytes:
    """The program sent to a host: ``juice.onhost.sampler``'s lab sampler."""
    return program({"kind": "lab", "root": host.root, "wan_if": host.wan_if, "max_args": MAX_ARGS,
                    "interval_s": interval_s, "max_s": max_s})


@dataclass
class _LabHost(_Host):
    ppids: dict[int, int] = field(default_factory=dict)  # remote pid -> its parent's
    links: int = 0


class HostSampler(SshProfiler):
    """The processes of a lab on its hosts (``SampledHost``: site k), into
    ``out_dir/profile.parquet``; ``records`` name the servers (see the module doc)."""

    def __init__(self, hosts: Sequence[SampledHost], out_dir: Path, interval_s: float,
                 records: Sequence[ServerRecord] = (), max_s: float = MAX_S) -> None:
        super().__init__(hosts, out_dir, interval_s, max_s)
        self.records: Mapping[tuple[int, int], ServerRecord] = {(r.site, r.pid): r for r in records if r.pid}

    def _new_host(self, site: int, spec: Any) -> _Host:
        return _LabHost(spec.site, spec, self.tmp / f"known_hosts-{spec.site}",
                        self.tmp / f"ssh-{spec.site}.err")

    def _label(self, h: _Host) -> str:
        return f"host of site {h.site} ({h.spec.name})"

    def _script(self, h: _Host) -> bytes:
        return remote_script(h.spec, self.interval_s, self.max_s)

    def _argv(self, h: _Host, script: bytes) -> list[str]:
        cmd = boot_command(script).replace("python3 ", f"{h.spec.python} ", 1)
        return list(h.spec.argv(cmd))

    def _comp(self, name: str) -> int:
        if name not in self.components:
            self.components.append(name)
        return self.components.index(name)

    def name(self, h: _LabHost, pid: int, ppid: int, start: int, comm: str, argv: Sequence[str],
             why: str) -> str:
        """The component of a process on ``h`` (as ``Sampler._name`` does here)."""
        if why == "agent":
            return AGENT
        rec = self.records.get((h.site, pid))
        if rec is not None and rec.pid_start in (None, start):
            return rec.kind
        p = ppid
        for _ in range(8):  # a recorded ancestor (a gunicorn master for its workers)
            if p <= 1:
                break
            anc = self.records.get((h.site, p))
            if anc is not None:
                return anc.kind
            p = h.ppids.get(p, 0)
        return procfs.component_of([str(a) for a in argv], comm)

    def _message(self, h: _Host, obj: dict[str, Any]) -> None:
        assert isinstance(h, _LabHost)
        if "n" in obj:
            with self._lock:
                for pid, ppid, start, comm, argv, why in obj["n"]:
                    pid, ppid = int(pid), int(ppid)
                    h.ppids[pid] = ppid
                    name = self.name(h, pid, ppid, int(start), str(comm), argv, str(why))[:40]
                    h.comps[pid] = self._comp(name)
                    h.seen[pid] = name
            return
        if "s" in obj and obj.get("l") is not None:
            assert h.offset_s is not None
            t = float(obj["t"]) - h.offset_s
            with self._lock:
                comp = self._comp(LINK)
                for m, v in zip(LINK_METRICS, obj["l"], strict=True):
                    self._out.rows.add(t, h.site, comp, 0, METRIC_INDEX[m], float(v))
                h.links += 1
        super()._message(h, obj)

    def summary(self) -> dict[str, Any]:
        import time

        wall = (self.t_stop or time.monotonic()) - self.t_start
        comps: dict[str, int] = {}
        hosts = []
        for h in self.hosts:
            assert isinstance(h, _LabHost)
            for c in h.seen.values():
                comps[c] = comps.get(c, 0) + 1
            hosts.append({"site": h.site, "host": h.spec.name, "wan_if": h.spec.wan_if,
                          "processes": len(h.seen), "samples": h.samples, "link_samples": h.links,
                          "python": h.python,
                          "offset_s": None if h.offset_s is None else round(h.offset_s, 6),
                          "rtt_s": None if h.rtt_s is None else round(h.rtt_s, 6),
                          "sampler_cpu_s": None if h.cpu_s is None else round(h.cpu_s, 4),
                          "end": h.end, "error": h.error})
        cpu = [x["sampler_cpu_s"] for x in hosts if x["sampler_cpu_s"] is not None]
        return {"version": PROFILE_VERSION, "source": "hosts",
                "table": PROFILE_TABLE if self.written else None,
                "interval_s": self.interval_s, "hz": round(1.0 / self.interval_s, 3),
                "clock": "epoch seconds on Juice's clock: each host's time.time() minus its offset "
                         "measured once at start, within +- rtt_s/2 (drift not corrected)",
                "clock_offsets": {str(x["site"]): {"offset_s": x["offset_s"], "rtt_s": x["rtt_s"]}
                                  for x in hosts},
                "metrics": {"process": list(PROCESS_METRICS), "link": list(LINK_METRICS), "database": []},
                "cumulative": list(CUMULATIVE), "hosts": hosts,
                "processes": sum(len(h.seen) for h in self.hosts), "components": dict(sorted(comps.items())),
                "sites": len(self.hosts),
                "network": any(h.links for h in self.hosts if isinstance(h, _LabHost)),
                "rows": self._out.written, "wall_s": round(wall, 3),
                "sampler_cpu_s": round(sum(cpu), 4) if cpu else None,
                "sampler_cpu_pct": round(100.0 * sum(cpu) / wall / len(cpu), 3) if cpu and wall > 0 else None,
                "errors": self.errors, "error_samples": list(self.error_samples)}
