"""Resource profiles of an existing cloud's servers, over SSH (``target.ssh`` in the spec).

    prof = ssh_profile.start(target.ssh, rd.partial, profile.settings(spec), progress)
    ... the run ...
    summary = prof.stop()          # writes <run>/profile.parquet; the manifest's "profile"

or ``with ssh_profile.around(hosts, run_dir, settings, progress): ...`` (adds the summary to
the run's manifest). Only when the user gives SSH access: a key file or the agent, never a
password (``ssh -o BatchMode=yes``: ssh never prompts, a refused key is an error).

Per host, one ``ssh`` process (started in a session of its own; its pid is recorded and it is
stopped by it) runs ``python3`` there (stdlib only) with :func:`program` (the modules
``juice.onhost.sampler`` and ``juice.onhost.procfs``, see ``juice.hosts.bundle``), sent on stdin. Not
``python3 -``: it reads its program to EOF, and the remote sampler's stdin must stay open,
because its closing is the stop signal; the remote command is ``python3 -c
'import sys;exec(sys.stdin.buffer.read(N))'``, N the script's length. The remote sampler
reads ``/proc`` of the processes whose command line matches the host's ``processes``
patterns (``juice.spec.target``), at the profile's rate (``profile:`` / ``JUICE_PROFILE_HZ``,
default 1 Hz), and prints JSON lines. It exits when its stdin closes (``stop``, or Juice
dying: the pipe closes with it, and so does ssh), when stdout breaks, or after ``max_s``
(default 24 h).

Clock: the remote clock is read once at start by ``PINGS`` round trips (Juice's clock before
and after each); the one of shortest RTT gives the offset (remote minus local, at the RTT's
midpoint), so the table's times are the remote's ``time.time()`` minus that offset, on
Juice's clock, within +- RTT/2 (both, per host, are in the summary: ``clock_offset_s``,
``clock_rtt_s``); a drift of the remote clock during the run is not corrected.

Host keys: accepted on first use (``StrictHostKeyChecking=accept-new``) into a known_hosts file
private to this run (a private temp dir, removed at stop; the system's
``/etc/ssh/ssh_known_hosts`` is still checked); the key's SHA256 fingerprint is in the summary.

The table is ``juice.profile.table``'s (``profile.parquet``): ``site`` = the host's
index in ``target.ssh`` (1-based), ``component`` = the pattern's name (``keystone``,
``mariadbd``, ``nova-conductor``...), ``pid`` = the remote pid; metrics ``cpu_user_s``,
``cpu_system_s`` (cumulative), ``rss_bytes``, ``threads``, ``fds`` (-1 rows skipped: fds
need the same user or root). Nothing here ever fails a run: errors are counted and the
first few kept in the summary, as the local sampler does.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from juice.errors import UserError
from juice.hosts import bundle
from juice.hosts.ssh import boot_command, fingerprint, ssh_argv
from juice.profile.table import (
    CUMULATIVE,
    FLUSH_ROWS,
    METRIC_INDEX,
    PROCESS_METRICS,
    PROFILE_TABLE,
    PROFILE_VERSION,
    Writer,
)

Progress = Callable[[str], None]
PINGS = 5
START_TIMEOUT_S = 30.0  # ssh connect + python start + the pings, per host (in parallel)
STOP_WAIT_S = 5.0
MAX_S = 24 * 3600.0
MAX_ERROR_SAMPLES = 5

def remote_script(patterns: Sequence[str], interval_s: float, max_s: float) -> bytes:
    """The program sent to a host: ``juice.onhost.sampler``'s pattern sampler."""
    return program({"kind": "patterns", "patterns": list(patterns), "interval_s": interval_s,
                    "max_s": max_s})


def program(cfg: dict[str, Any]) -> bytes:
    """``juice.onhost.sampler`` with ``procfs`` (real modules, shipped as their source), run
    with ``cfg`` (its ``kind`` picks the sampler)."""
    from juice.onhost import procfs, sampler

    return bundle.program(
        [(m.__name__, inspect.getsource(m)) for m in (procfs, sampler)],
        f"import juice.onhost.sampler\njuice.onhost.sampler.main({json.dumps(cfg)!r})")


def check(hosts: Sequence[Any]) -> None:
    """UserError (naming the field) when ssh is missing or a key file is not readable."""
    if shutil.which("ssh") is None:
        raise UserError("target.ssh: the ssh client is not installed (Debian: openssh-client)")
    for i, h in enumerate(hosts):
        if h.key_file and not os.access(Path(h.key_file).expanduser(), os.R_OK):
            raise UserError(f"target.ssh.{i}.key_file: {h.key_file}: not a readable file")


@dataclass
class _Host:
    site: int
    spec: Any
    known_hosts: Path
    stderr_path: Path
    proc: subprocess.Popen[bytes] | None = None
    pid: int | None = None
    thread: threading.Thread | None = None
    started: threading.Event = field(default_factory=threading.Event)
    offset_s: float | None = None
    rtt_s: float | None = None
    python: str | None = None
    host_key: str | None = None
    comps: dict[int, int] = field(default_factory=dict)  # remote pid -> component index
    seen: dict[int, str] = field(default_factory=dict)  # every remote pid sampled -> component
    samples: int = 0
    cpu_s: float | None = None  # the remote sampler's own CPU seconds (from its end message)
    end: str | None = None
    error: str | None = None


class SshProfiler:
    """One ssh per host of ``hosts`` (``target.ssh`` entries), into ``out_dir/profile.parquet``."""

    def __init__(self, hosts: Sequence[Any], out_dir: Path, interval_s: float, max_s: float = MAX_S,
                 ssh: str = "ssh") -> None:
        from juice import paths
        from juice.load.api import Clock

        self.out_dir, self.interval_s, self.max_s, self.ssh = out_dir, interval_s, max_s, ssh
        self.tmp = paths.private_tmp("target")
        self.hosts = [self._new_host(i, h) for i, h in enumerate(hosts, 1)]
        self.clock = Clock()
        self.components: list[str] = []
        self._out = Writer(out_dir)
        self._lock = threading.Lock()
        self._discard = self._stopping = False
        self.errors = 0
        self.error_samples: list[str] = []
        self.t_start = self.t_stop = 0.0
        self.written: Path | None = None

    def _new_host(self, site: int, spec: Any) -> _Host:
        return _Host(site, spec, self.tmp / f"known_hosts-{site}", self.tmp / f"ssh-{site}.err")

    def now(self) -> float:
        return self.clock.epoch(self.clock.ns())

    def start(self, wait_s: float = START_TIMEOUT_S) -> SshProfiler:
        """Start every host's sampler; return once each samples or failed (at most ``wait_s``)."""
        self.t_start = time.monotonic()
        for h in self.hosts:
            h.thread = threading.Thread(target=self._host, args=(h,), name=f"juice-ssh-profile-{h.site}",
                                        daemon=True)
            h.thread.start()
        deadline = time.monotonic() + wait_s
        for h in self.hosts:
            if not h.started.wait(max(0.0, deadline - time.monotonic())):
                self._error(h, f"not sampling after {wait_s:g} s")
        return self

    def _error(self, h: _Host | None, msg: str) -> None:
        with self._lock:
            if h is not None:
                msg = f"{self._label(h)}: {msg}"
                h.error = h.error or msg
            self.errors += 1
            if len(self.error_samples) < MAX_ERROR_SAMPLES:
                self.error_samples.append(msg)

    def _label(self, h: _Host) -> str:
        return f"host {h.site} ({h.spec.user}@{h.spec.host}:{h.spec.port})"

    def _script(self, h: _Host) -> bytes:
        return remote_script(h.spec.patterns, self.interval_s, self.max_s)

    def _argv(self, h: _Host, script: bytes) -> list[str]:
        return ssh_argv(h.spec, h.known_hosts, boot_command(script), self.ssh)

    def _stderr(self, h: _Host) -> str:
        try:
            lines = [x for x in h.stderr_path.read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            return ""
        return "; ".join(lines[-3:])[:400]

    # ---- one host's thread ------------------------------------------------------------
    def _host(self, h: _Host) -> None:
        try:
            script = self._script(h)
            with open(h.stderr_path, "wb") as err:
                h.proc = subprocess.Popen(self._argv(h, script),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                          start_new_session=True)
            h.pid = h.proc.pid
            assert h.proc.stdin is not None and h.proc.stdout is not None
            try:
                h.proc.stdin.write(script)
                h.proc.stdin.flush()
            except BrokenPipeError:  # ssh already gone: its stderr says why (below)
                pass
            self._handshake(h, h.proc.stdin, h.proc.stdout)
            if h.offset_s is None:
                return
            h.host_key = fingerprint(h.known_hosts)
            h.started.set()
            for line in h.proc.stdout:
                try:
                    self._line(h, line)
                except (ValueError, TypeError, KeyError, AttributeError) as e:
                    self._error(h, f"not a sample ({type(e).__name__}: {e}): {line[:80]!r}")
        except Exception as e:  # never into the run (after stop began: its own doing)
            if not self._stopping:
                self._error(h, f"{type(e).__name__}: {e}")
        finally:
            h.started.set()

    def _handshake(self, h: _Host, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        ready = self._read(stdout)
        if ready is None or "ready" not in ready:
            code = h.proc.wait(STOP_WAIT_S) if h.proc is not None else None
            self._error(h, f"ssh exited ({code}): {self._stderr(h) or 'no sampler started'}")
            return
        h.python = ready.get("python")
        best: tuple[float, float] | None = None
        for _ in range(PINGS):
            t0 = self.now()
            stdin.write(b"ping\n")
            stdin.flush()
            pong = self._read(stdout)
            t1 = self.now()
            if pong is None or "pong" not in pong:
                self._error(h, f"no answer to the clock probe: {self._stderr(h)}")
                return
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, float(pong["pong"]) - (t0 + t1) / 2)
        assert best is not None
        h.rtt_s, h.offset_s = best
        stdin.write(b"go\n")
        stdin.flush()

    @staticmethod
    def _read(stdout: IO[bytes]) -> dict[str, Any] | None:
        """The next JSON object (a login script's chatter skipped, 50 lines at most)."""
        for _ in range(50):
            line = stdout.readline()
            if not line:
                return None
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
        return None

    def _line(self, h: _Host, line: bytes) -> None:
        self._message(h, json.loads(line))

    def _message(self, h: _Host, obj: dict[str, Any]) -> None:
        if "s" in obj:
            assert h.offset_s is not None
            t = float(obj["t"]) - h.offset_s
            with self._lock:
                add = self._out.rows.add
                for pid, user_s, sys_s, rss, threads, fds in obj["s"]:
                    comp = h.comps.get(pid)
                    if comp is None:
                        continue
                    vals = (user_s, sys_s, rss, threads, fds)
                    for m, v in zip(PROCESS_METRICS, vals, strict=True):
                        if v >= 0:
                            add(t, h.site, comp, pid, METRIC_INDEX[m], float(v))
                h.samples += 1
                if len(self._out.rows) >= FLUSH_ROWS and not self._discard:
                    self._out.flush(self.components)
        elif "n" in obj:
            with self._lock:
                for pid, name in obj["n"]:
                    name = str(name)[:40]
                    if name not in self.components:
                        self.components.append(name)
                    h.comps[int(pid)] = self.components.index(name)
                    h.seen[int(pid)] = name
        elif "e" in obj:
            self._error(h, f"remote: {obj['e']}")
        elif "end" in obj:
            h.end = str(obj["end"])
            h.cpu_s = float(obj["cpu_s"]) if obj.get("cpu_s") is not None else None
            if h.end != "stdin closed":
                self._error(h, f"the remote sampler stopped ({h.end})")

    # ---- stop ---------------------------------------------------------------------------
    def stop(self, keep: bool = True) -> dict[str, Any]:
        """Close every sampler's stdin, wait (bounded), kill what is left by its pid; write the
        table unless ``keep`` is False (an interrupted run); the summary. Never raises."""
        self._discard, self._stopping = not keep, True
        for h in self.hosts:
            if h.proc is not None and h.proc.stdin is not None:
                try:
                    h.proc.stdin.close()
                except OSError:
                    pass
        deadline = time.monotonic() + STOP_WAIT_S
        for h in self.hosts:
            if h.proc is None:
                continue
            try:
                h.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._error(h, f"ssh (pid {h.pid}) still running after {STOP_WAIT_S:g} s: killed")
                h.proc.kill()  # Popen.kill: this very pid, only while not yet reaped
                try:
                    h.proc.wait(STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    self._error(h, f"ssh (pid {h.pid}) survived SIGKILL")
            if h.thread is not None:
                h.thread.join(STOP_WAIT_S)
            if h.proc.stdout is not None:
                h.proc.stdout.close()
        with self._lock:
            try:
                if keep:
                    self.written = self._out.finish(self.components)
                else:
                    self._out.discard()
            except Exception as e:
                self.errors += 1
                self.error_samples.append(f"writing {PROFILE_TABLE}: {type(e).__name__}: {e}")
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.t_stop = time.monotonic()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        wall = (self.t_stop or time.monotonic()) - self.t_start
        comps: dict[str, int] = {}
        hosts = []
        for h in self.hosts:
            for c in h.seen.values():
                comps[c] = comps.get(c, 0) + 1
            hosts.append({"site": h.site, "host": h.spec.host, "port": h.spec.port, "user": h.spec.user,
                          "site_name": h.spec.site_name, "patterns": list(h.spec.patterns),
                          "processes": len(h.seen), "samples": h.samples, "python": h.python,
                          "clock_offset_s": None if h.offset_s is None else round(h.offset_s, 6),
                          "clock_rtt_s": None if h.rtt_s is None else round(h.rtt_s, 6),
                          "host_key": h.host_key,
                          "end": h.end, "error": h.error})
        return {"version": PROFILE_VERSION, "source": "ssh",
                "table": PROFILE_TABLE if self.written else None,
                "interval_s": self.interval_s, "hz": round(1.0 / self.interval_s, 3),
                "clock": "epoch seconds on Juice's clock: each host's time.time() minus its offset "
                         "measured once at start, within +- clock_rtt_s/2 (drift not corrected)",
                "metrics": {"process": list(PROCESS_METRICS)}, "cumulative": list(CUMULATIVE),
                "sites": "site k = the k-th host of target.ssh", "hosts": hosts,
                "processes": sum(len(h.seen) for h in self.hosts), "components": dict(sorted(comps.items())),
                "rows": self._out.written, "wall_s": round(wall, 3),
                "errors": self.errors, "error_samples": list(self.error_samples)}


def start(hosts: Sequence[Any], out_dir: Path, conf: Any, progress: Progress,
          max_s: float = MAX_S, ssh: str = "ssh") -> SshProfiler | None:
    """A running SSH profiler (None when profiles are disabled); never raises."""
    if not conf.enabled or not hosts:
        return None
    try:
        prof = SshProfiler(hosts, out_dir, conf.interval_s, max_s, ssh).start()
    except Exception as e:
        progress(f"resource profile over SSH not sampled ({type(e).__name__}: {e})")
        return None
    ok = [h for h in prof.hosts if h.offset_s is not None and h.error is None]
    progress(f"resource profile over SSH: {len(ok)}/{len(prof.hosts)} host(s) sampling at "
             f"{1 / prof.interval_s:g} Hz" + "".join(f"; {h.error}" for h in prof.hosts if h.error))
    return prof


@contextmanager
def around(hosts: Sequence[Any], run_dir: Path, conf: Any,
           progress: Progress) -> Iterator[SshProfiler | None]:
    """Profile ``hosts`` around a run writing into ``run_dir``; its manifest gets the summary
    (a failed run keeps its profile, an interrupted one none)."""
    from juice.profile.table import add_to_manifest

    prof = start(hosts, run_dir, conf, progress)
    try:
        yield prof
    except BaseException as e:
        if prof is not None:
            prof.stop(keep=not isinstance(e, KeyboardInterrupt))
        raise
    if prof is not None:
        summary = prof.stop()
        manifest = run_dir / "manifest.json"
        if manifest.exists():
            add_to_manifest(manifest, summary)

