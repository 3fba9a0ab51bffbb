"""Resource profiles: what every process Juice started in a lab spends, sampled beside each run.

The generic runner (``juice.sweep.sweep``) starts a :class:`Sampler` around every
``study.run_point``, so every study gets one ``profile.parquet`` per run::

    prof = profile.start(lab, services, rd.partial, profile.settings(spec), progress)
    ... the run ...
    summary = prof.stop()            # writes <run>/profile.parquet; the manifest's "profile"

Which processes: every pid whose ``/proc/<pid>/ns/net`` is one of the lab's namespaces (the
sites and the core) belongs to the lab; nothing else runs there. Each is named once (again
when it execs): the ``kind`` of the deployment's ``ServerRecord`` for that pid or its nearest
recorded ancestor (``galera``, ``keystone`` for a gunicorn master and its workers,
``memcached``...), else from its command line (``load-driver``, ``wan-delay``, a study's
``x.worker``...; see ``procfs.component_of``). The scan of /proc runs every tick, at most
4 times a second; a process that lives less than a tick may be missed.

What, per tick (default 1 Hz, up to 10 Hz), in the tidy table ``time, site, component, pid,
metric, value`` (``site`` 0 = the core namespace; ``time`` = epoch seconds on the iterations'
clock: the wall clock anchored once, then ``perf_counter``):

- per process (``/proc/<pid>/stat``, kept open and re-read with ``pread``, so a pid reused
  by another process is never mixed up): ``cpu_user_s``, ``cpu_system_s`` (CUMULATIVE CPU
  seconds since the process started, all its threads, 10 ms resolution; utilisation is
  derived: ``juice.profile.frames.utilisation``), ``rss_bytes``, ``threads``, ``fds``;
- per site (component ``link``, pid 0): ``net_in_bytes``, ``net_out_bytes``,
  ``net_in_packets``, ``net_out_packets`` of the site's one link (cumulative; "in" = towards
  the site). Every link ends in the core namespace, so ONE read of the core's ``net/dev``
  per tick gives every site: a short-lived thread joins the core namespace (setns) once to
  open ``/proc/thread-self/net/dev``; the open file keeps reading that namespace's counters
  after the thread has ended. No helper process is started at all;
- per database server (``juice.profile.dbstats``): ``db_reads``, ``db_writes`` (cumulative
  statements), on Galera ``fc_paused_s`` (cumulative seconds paused by flow control) and
  ``fc_paused`` (``wsrep_flow_control_paused``).

The sampler is one daemon thread with bounded work per tick (database queries time out after
2 s, late ticks are skipped and counted); it never fails a run: errors are counted and the
first few stored in the manifest; a process that ends is simply no longer sampled. The table
(``juice.profile.table``) is spilled in row groups and renamed into place when
complete. Its own CPU time (``time.thread_time`` of its thread) is in the manifest:
``tick_cpu_s`` (sampling) and ``sampler_cpu_s`` (plus start and writing the table).

On SSH hosts (``lab.local_namespaces()`` is None, ``lab.sampled_hosts()`` names them),
``start`` returns ``juice.profile.hosts.HostSampler`` instead: the same table, sampled on
each host over ssh, its times on this machine's clock (each host's offset measured).

Rate: ``settings(spec)``: ``JUICE_PROFILE_HZ`` (``off`` disables), else the spec's optional
``profile: {interval_s: 1.0}`` (or ``{hz: 1}``, ``{enabled: false}``), else 1 Hz.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from juice.errors import UserError
from juice.lab.place import Lab, SampledHost
from juice.onhost import procfs
from juice.profile.table import (
    CUMULATIVE,
    DB_METRICS,
    FLUSH_ROWS,
    LINK_METRICS,
    METRIC_INDEX,
    METRICS,
    PROCESS_METRICS,
    PROFILE_TABLE,
    PROFILE_VERSION,
    Writer,
    add_to_manifest,
)
from juice.services.base import ServerRecord

__all__ = ["CUMULATIVE", "METRICS", "PROFILE_TABLE", "Sampler", "Settings", "add_to_manifest",
           "settings", "start"]

DEFAULT_INTERVAL_S = 1.0
MIN_INTERVAL_S = 0.1  # 10 Hz
MAX_INTERVAL_S = 60.0
DISCOVER_EVERY_S = 0.25  # the /proc scan: every tick up to 4 Hz (~0.25 ms CPU for 250 processes)
MAX_ERROR_SAMPLES = 5
LINK = "link"
NETNS_DIR = Path("/run/netns")

Progress = Callable[[str], None]


# ---- settings ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """How often to sample (``interval_s``), or not at all. ``source`` says who decided."""

    interval_s: float = DEFAULT_INTERVAL_S
    enabled: bool = True
    source: str = "default"


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def settings(spec: Any, env: Mapping[str, str] | None = None) -> Settings:
    """The sampling settings of a run: ``JUICE_PROFILE_HZ`` (``0``/``off`` disables) over the
    spec's optional ``profile`` (``{interval_s: 1.0}`` or ``{hz: 1}``, ``enabled: false``),
    else 1 Hz. UserError for a rate outside (0, 10] Hz."""
    env = os.environ if env is None else env
    raw = env.get("JUICE_PROFILE_HZ", "").strip()
    if raw:
        if raw.lower() in ("0", "off", "no", "false"):
            return Settings(enabled=False, source="JUICE_PROFILE_HZ")
        try:
            hz = float(raw)
        except ValueError:
            raise UserError(f"JUICE_PROFILE_HZ: expected a rate in Hz (0 < hz <= 10) or off, "
                            f"got {raw!r}") from None
        return Settings(interval_s=_interval(1.0 / hz if hz > 0 else 0.0, "JUICE_PROFILE_HZ"),
                        source="JUICE_PROFILE_HZ")
    prof = getattr(spec, "profile", None)
    if prof is None:
        return Settings()
    if prof is False or _field(prof, "enabled") is False:
        return Settings(enabled=False, source="spec")
    interval, hz = _field(prof, "interval_s"), _field(prof, "hz")
    if interval is None and hz is None:
        return Settings(source="spec")
    value = float(interval) if interval is not None else (1.0 / float(hz) if float(hz) > 0 else 0.0)
    return Settings(interval_s=_interval(value, "profile"), source="spec")


def _interval(value: float, where: str) -> float:
    if not MIN_INTERVAL_S - 1e-9 <= value <= MAX_INTERVAL_S:
        raise UserError(f"{where}: sampling interval {value:g} s is out of range "
                        f"({MIN_INTERVAL_S:g}..{MAX_INTERVAL_S:g} s, i.e. at most 10 Hz)")
    return value


# ---- what belongs to a lab -------------------------------------------------------------------

def lab_namespaces(lab: Lab | None) -> dict[str, int] | None:
    """Namespace name -> site (0 = the core) of a lab whose processes this machine sees;
    None for anything else (hosts, an existing cloud)."""
    return lab.local_namespaces() if lab is not None else None


def records_of(services: Sequence[Any]) -> tuple[list[ServerRecord], list[str]]:
    """Every ServerRecord of ``services`` (those failing to answer are reported, not fatal)."""
    recs: list[ServerRecord] = []
    errors: list[str] = []
    for s in services:
        try:
            recs.extend(r for r in s.records() if isinstance(r, ServerRecord))
        except Exception as e:
            errors.append(f"records of {type(s).__name__}: {e}")
    return recs, errors


# ---- the sampler -----------------------------------------------------------------------------

@dataclass
class _Proc:
    pid: int
    fd: int
    site: int
    comm: str
    comp: int  # index into Sampler.components


_M = METRIC_INDEX


class Sampler:
    """Samples the processes of the namespaces ``namespaces`` (name -> site, 0 = core) into
    ``out_dir/profile.parquet`` every ``interval_s`` from ``start()`` to ``stop()``."""

    def __init__(self, namespaces: Mapping[str, int], out_dir: Path, *,
                 interval_s: float = DEFAULT_INTERVAL_S, records: Sequence[ServerRecord] = (),
                 core_ns: str | None = None, netns_dir: Path = NETNS_DIR) -> None:
        from juice.load.api import Clock

        self.namespaces, self.out_dir, self.interval_s = dict(namespaces), out_dir, interval_s
        self.core_ns, self.netns_dir = core_ns, netns_dir
        self.records = {r.pid: r for r in records if r.pid}
        self.clock = Clock()
        self.components: list[str] = []
        self._comp_idx: dict[str, int] = {}
        self._link_site: dict[str, int] = {}
        self._procs: dict[int, _Proc] = {}
        self._seen: dict[int, str] = {}  # every pid ever sampled -> its component
        self._net_fd: int | None = None
        self._net_ok = False
        self._dbs: list[Any] = []
        self._out = Writer(out_dir)
        self._stop = threading.Event()
        self._discard = False
        self._thread: threading.Thread | None = None
        self._next_discovery = 0.0
        self.ticks = self.late_ticks = self.errors = 0
        self.error_samples: list[str] = []
        self.cpu_s = 0.0  # every CPU second of the sampler: start, ticks, writing the table
        self.tick_cpu_s = 0.0  # the ticks alone (the steady-state cost)
        self.t_start = self.t_stop = 0.0
        self.written: Path | None = None

    # ---- lifecycle -------------------------------------------------------------------
    def start(self) -> Sampler:
        # imported now, not counted as the sampler's cost (the runner needs them anyway)
        import numpy  # noqa: F401
        import pyarrow.parquet  # type: ignore[import-untyped]  # noqa: F401

        c0 = time.thread_time()
        self.t_start = time.monotonic()
        for ns, site in self.namespaces.items():
            try:
                self._link_site[f"net:[{(self.netns_dir / ns).stat().st_ino}]"] = site
            except OSError as e:
                self._error(f"namespace {ns}: {e.strerror}")
        if self.core_ns:
            try:
                self._net_fd = _open_in_ns(self.core_ns, "/proc/thread-self/net/dev")
                self._net_ok = True
            except Exception as e:
                self._error(f"network counters of {self.core_ns}: {e}")
        if any(procfs_db(r) for r in self.records.values()):
            from juice.profile import dbstats

            for r in self.records.values():
                src = dbstats.source_for(r)
                if src is not None:
                    self._dbs.append(src)
        self.cpu_s += time.thread_time() - c0
        self._thread = threading.Thread(target=self._loop, name="juice-profile", daemon=True)
        self._thread.start()
        return self

    def stop(self, keep: bool = True, timeout: float = 30.0) -> dict[str, Any]:
        """Stop sampling (one last tick first); write the table unless ``keep`` is False (an
        interrupted run); return the summary. Never raises."""
        self._discard = not keep
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._error(f"the sampler thread did not stop within {timeout:g} s")
        return self.summary()

    def summary(self) -> dict[str, Any]:
        wall = (self.t_stop or time.monotonic()) - self.t_start
        comps: dict[str, int] = {}
        for c in self._seen.values():
            comps[c] = comps.get(c, 0) + 1
        return {"version": PROFILE_VERSION, "table": PROFILE_TABLE if self.written else None,
                "interval_s": self.interval_s, "hz": round(1.0 / self.interval_s, 3),
                "clock": "epoch seconds, wall clock anchored once then perf_counter (as iterations)",
                "metrics": {"process": list(PROCESS_METRICS), "link": list(LINK_METRICS),
                            "database": list(DB_METRICS)},
                "cumulative": list(CUMULATIVE), "processes": len(self._seen),
                "components": dict(sorted(comps.items())),
                "sites": sum(1 for s in self._link_site.values() if s > 0),
                "network": self._net_ok,
                "databases": len(self._dbs), "ticks": self.ticks, "late_ticks": self.late_ticks,
                "rows": self._out.written, "wall_s": round(wall, 3), "sampler_cpu_s": round(self.cpu_s, 4),
                "sampler_cpu_pct": round(100.0 * self.cpu_s / wall, 3) if wall > 0 else None,
                "tick_cpu_s": round(self.tick_cpu_s, 4),
                "tick_cpu_pct": round(100.0 * self.tick_cpu_s / wall, 3) if wall > 0 else None,
                "errors": self.errors, "error_samples": list(self.error_samples)}

    # ---- the thread ------------------------------------------------------------------
    def _loop(self) -> None:
        c0 = time.thread_time()
        try:
            nxt = time.monotonic()
            while True:
                self._tick()
                nxt += self.interval_s
                now = time.monotonic()
                if now > nxt:  # overran: skip the ticks that are already late
                    missed = int((now - nxt) // self.interval_s) + 1
                    self.late_ticks += missed
                    nxt += missed * self.interval_s
                if self._stop.wait(nxt - now):
                    break
            if not self._discard:
                self._tick()  # the end of the run
        except Exception as e:  # a bug: keep what was sampled, never fail the run
            self._error(f"sampler stopped: {type(e).__name__}: {e}")
        finally:
            try:
                self._finish()
            finally:
                self._close()
                self.t_stop = time.monotonic()
                self.cpu_s += time.thread_time() - c0

    def _tick(self) -> None:
        c0 = time.thread_time()
        try:
            self._tick_body()
        finally:
            self.tick_cpu_s += time.thread_time() - c0

    def _tick_body(self) -> None:
        t = self.clock.epoch(self.clock.ns())
        mono = time.monotonic()
        if mono >= self._next_discovery:
            self._next_discovery = mono + DISCOVER_EVERY_S
            try:
                self._discover()
            except Exception as e:
                self._error(f"scan of /proc: {type(e).__name__}: {e}")
        self._sample_procs(t)
        if self._net_fd is not None:
            try:
                self._sample_links(t)
            except Exception as e:
                self._error(f"network counters: {type(e).__name__}: {e}")
        for src in self._dbs:
            if self._stop.is_set() and self._discard:
                break
            try:
                vals = src.sample()
            except Exception as e:
                self._error(f"{src.record.kind} in site {src.record.site}: {type(e).__name__}: {e}")
                continue
            comp = self._comp(src.record.kind)
            for m, v in vals.items():
                if m in _M:  # a metric the table does not know is a bug, not a reason to stop
                    self._out.rows.add(t, src.record.site, comp, src.record.pid, _M[m], v)
                else:
                    self._error(f"unknown metric {m!r} from {src.record.kind}")
        self.ticks += 1
        if len(self._out.rows) >= FLUSH_ROWS and not self._discard:
            self._out.flush(self.components)

    # ---- discovery and naming --------------------------------------------------------
    def _discover(self) -> None:
        me = os.getpid()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid in self._procs or pid == me:
                continue
            try:
                site = self._link_site.get(os.readlink(f"/proc/{name}/ns/net"))
            except OSError:
                continue
            if site is not None:
                self._adopt(pid, site)

    def _adopt(self, pid: int, site: int) -> None:
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            return
        try:
            st = procfs.parse_stat(os.pread(fd, 2048, 0))
        except (OSError, ValueError):
            os.close(fd)
            return
        if st.state in ("Z", "X"):
            os.close(fd)
            return
        p = _Proc(pid, fd, site, st.comm, self._comp(self._name(pid, st)))
        self._procs[pid] = p
        self._seen[pid] = self.components[p.comp]

    def _name(self, pid: int, st: procfs.Stat) -> str:
        rec = self.records.get(pid)
        if rec is not None and rec.pid_start in (None, st.start):
            return rec.kind
        ppid = st.ppid
        for _ in range(8):  # a recorded ancestor (a gunicorn master for its workers)
            if ppid <= 1:
                break
            if ppid in self.records:
                return self.records[ppid].kind
            parent = procfs.read_stat(ppid)
            if parent is None:
                break
            ppid = parent.ppid
        return procfs.component_of(procfs.read_cmdline(pid), st.comm)

    def _comp(self, name: str) -> int:
        idx = self._comp_idx.get(name)
        if idx is None:
            idx = self._comp_idx[name] = len(self.components)
            self.components.append(name)
        return idx

    # ---- sampling --------------------------------------------------------------------
    def _sample_procs(self, t: float) -> None:
        gone: list[int] = []
        add = self._out.rows.add
        for pid, p in self._procs.items():
            try:
                raw = os.pread(p.fd, 2048, 0)
                st = procfs.parse_stat(raw)
            except (OSError, ValueError):
                gone.append(pid)
                continue
            if st.state in ("Z", "X"):
                gone.append(pid)
                continue
            if st.comm != p.comm:  # it exec'd (e.g. `ip netns exec` became the server)
                p.comm = st.comm
                p.comp = self._comp(self._name(pid, st))
                self._seen[pid] = self.components[p.comp]
            fds = procfs.fd_count(pid)
            add(t, p.site, p.comp, pid, 0, st.user_s)
            add(t, p.site, p.comp, pid, 1, st.system_s)
            add(t, p.site, p.comp, pid, 2, float(st.rss_bytes))
            add(t, p.site, p.comp, pid, 3, float(st.threads))
            if fds >= 0:
                add(t, p.site, p.comp, pid, 4, float(fds))
        for pid in gone:
            os.close(self._procs.pop(pid).fd)

    def _sample_links(self, t: float) -> None:
        assert self._net_fd is not None
        links = procfs.site_links(procfs.parse_net_dev(os.pread(self._net_fd, 1 << 18, 0)))
        comp = self._comp(LINK)
        base = _M["net_in_bytes"]
        for site, d in links.items():
            for i, v in enumerate((d.rx_bytes, d.tx_bytes, d.rx_packets, d.tx_packets)):
                self._out.rows.add(t, site, comp, 0, base + i, float(v))

    # ---- output ----------------------------------------------------------------------
    def _error(self, msg: str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append(msg)

    def _finish(self) -> None:
        if self._discard:
            self._out.discard()
            return
        try:
            self.written = self._out.finish(self.components)
        except Exception as e:
            self._error(f"writing {PROFILE_TABLE}: {type(e).__name__}: {e}")

    def _close(self) -> None:
        for p in self._procs.values():
            os.close(p.fd)
        self._procs.clear()
        if self._net_fd is not None:
            os.close(self._net_fd)
            self._net_fd = None
        for src in self._dbs:
            src.close()


def procfs_db(r: ServerRecord) -> bool:
    """True when ``r`` looks like a database server with counters (see ``dbstats``)."""
    return bool(r.extra.get("socket") or r.extra.get("socket_dir"))


def _open_in_ns(ns: str, path: str) -> int:
    """``os.open(path)`` from a thread inside network namespace ``ns`` (the fd keeps that view)."""
    from juice.lab.setns import in_site

    return in_site(ns, lambda: os.open(path, os.O_RDONLY), timeout=10.0)


# ---- what the runner calls ---------------------------------------------------------------

class Running(Protocol):
    """A started profile of a run: ``stop`` writes the table and gives the manifest's summary."""

    def stop(self, keep: bool = True) -> dict[str, Any]: ...


def start(lab: Lab | None, services: Callable[[], Sequence[Any]], out_dir: Path, conf: Settings,
          progress: Progress) -> Running | None:
    """A running profile of a run in ``lab``: this machine's sampler when the lab's processes
    are here (``lab.local_namespaces()``), else over ssh on the hosts the lab names
    (``lab.sampled_hosts()``, ``juice.profile.hosts``). None when disabled, when there is no
    lab, or when it cannot start: the run goes on without a profile. Never raises."""
    if not conf.enabled:
        return None
    namespaces = lab_namespaces(lab)
    if namespaces is None:
        try:
            hosts = lab.sampled_hosts() if lab is not None else None
        except Exception as err:
            progress(f"resource profile not sampled ({type(err).__name__}: {err})")
            return None
        return _start_on_hosts(hosts, services, out_dir, conf, progress) if hosts else None
    try:
        recs, errs = records_of(services())
        core = next((ns for ns, s in namespaces.items() if s == 0), None)
        s = Sampler(namespaces, out_dir, interval_s=conf.interval_s, records=recs, core_ns=core)
        for e in errs:
            s._error(e)
    except Exception as e:
        progress(f"resource profile not sampled ({type(e).__name__}: {e})")
        return None
    try:
        return s.start()
    except Exception as e:
        s._close()
        progress(f"resource profile not sampled ({type(e).__name__}: {e})")
        return None


def _start_on_hosts(hosts: Sequence[SampledHost], services: Callable[[], Sequence[Any]], out_dir: Path,
                    conf: Settings, progress: Progress) -> Running | None:
    from juice.profile.hosts import HostSampler

    try:
        recs, errs = records_of(services())
        s = HostSampler(hosts, out_dir, conf.interval_s, recs)
        for e in errs:
            s._error(None, e)
        s.start()
    except Exception as e:
        progress(f"resource profile not sampled ({type(e).__name__}: {e})")
        return None
    ok = [h for h in s.hosts if h.offset_s is not None and h.error is None]
    progress(f"resource profile: {len(ok)}/{len(s.hosts)} host(s) sampled at {1 / s.interval_s:g} Hz "
             f"(clock offsets " + ", ".join(f"{h.offset_s * 1e3:+.1f}±{h.rtt_s * 5e2:.1f} ms"
                                            for h in ok if h.rtt_s is not None and h.offset_s is not None)
             + ")" + "".join(f"; {h.error}" for h in s.hosts if h.error))
    return s
