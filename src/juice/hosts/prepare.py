"""Preparing hosts (``juice hosts prepare``): on every host of a spec's ``provider:``, over plain
ssh, in parallel, three steps, each bounded by a timeout:

1. **check**: reachable (BatchMode: a key, never a prompt), logged in as root, Debian, tar there;
2. **copy**: this clone's tracked files (``git ls-files``) to the SAME absolute path on the host
   (the venv's editable install and ``python -m juice.driver`` resolve there). Only what differs
   is sent: the host lists mode, size and mtime of those paths (``stat``), the rest goes as one
   ``tar`` stream over ssh (mtimes kept, so a second run sends nothing). Nothing is deleted there;
3. **bundle** (``--offline`` only): the offline bundle made here (juice.hosts.offline: the
   locked wheels, the Debian packages and their dependencies, the native helpers) to the same
   path on the host, sent as the clone is (only what differs);
4. **setup**: ``bash scripts/setup.sh`` in that directory with ``JUICE_CACHE`` as here (and
   ``JUICE_OFFLINE`` = the bundle: nothing is fetched), or a ``command`` for diagnostics, its
   output streamed into the host's log;
5. **verify** (not with a ``command``): ``scripts/verify-setup.sh`` there: each venv equals its
   lock, ``uv pip check`` passes, the helpers are there (offline: the bundle's, by sha256).

Each host's outcome says what was copied (files, bytes) and how long each step took.

    targets = [Target(1, host1), Target(2, host2)]
    ctx = Context(source=Path("/srv/juice"), run_dir=Path("/var/tmp/juice/prepare/x"), ...)
    outcomes = prepare_all(targets, ctx, parallel=10)   # one Outcome per host, in site order

Every process is started in a session of its own, recorded, and stopped by that record
(``Runner.stop_all``) on Ctrl-C or a timeout. No temporary file: lists and archives are pipes;
what stays is the run directory (one log and one known_hosts per host).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from juice.errors import UserError
from juice.hosts.offline import Bundle
from juice.hosts.ssh import ssh_argv

Progress = Callable[[str], None]

CHECK_TIMEOUT_S = 60.0
COPY_TIMEOUT_S = 900.0
SETUP_TIMEOUT_S = 3600.0
VERIFY_TIMEOUT_S = 300.0
KILL_AFTER_S = 30  # the host's `timeout -k`: SIGKILL this long after SIGTERM
GRACE_S = 5.0  # a stopped process: SIGKILL this long after SIGTERM
TAIL_LINES = 8
SETUP = "bash scripts/setup.sh"
VERIFY = "bash scripts/verify-setup.sh"


class Stopped(Exception):
    """The run is being stopped (Ctrl-C): no new process is started."""


@dataclass(frozen=True)
class Target:
    """One host to prepare: site k of the provider."""

    site: int
    host: Any  # StaticHost: address, port, user, key_file

    @property
    def name(self) -> str:
        h = self.host
        return f"host {self.site} ({h.user}@{h.address}:{h.port})"


@dataclass(frozen=True)
class Copied:
    """One copy to a host: files sent (those that differed) of the total, and their bytes."""

    sent: int
    total: int
    bytes: int


@dataclass
class Outcome:
    """How one host went: ``step`` is where it failed (check, copy, setup), or ``done``."""

    target: Target
    ok: bool
    step: str
    seconds: float
    log: Path
    why: str = ""
    sent: int = 0  # the clone's files sent
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds, in order
    copied: dict[str, Copied] = field(default_factory=dict)  # "clone", "bundle" -> what was sent
    phases: list[tuple[str, float]] = field(default_factory=list)  # setup.sh's own steps, seconds

    def copy_summary(self) -> str:
        """e.g. "3 of 950 files (0.1 MB), bundle 1210 of 1210 files (812.4 MB)" (the clone first,
        unnamed)."""
        return ", ".join(("" if k == "clone" else f"{k} ") + f"{c.sent} of {c.total} files "
                         f"({c.bytes / 1e6:.1f} MB)" for k, c in self.copied.items())

    def step_summary(self) -> str:
        """e.g. "check 0.3 s, copy 1.2 s, bundle 20.5 s, setup.sh 200.1 s, verify 3.0 s"."""
        return ", ".join(f"{k} {v:.1f} s" for k, v in self.steps.items())

    def tail(self, lines: int = TAIL_LINES) -> list[str]:
        """The last non-empty lines of the host's log."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return [x for x in text.splitlines() if x.strip()][-lines:]


# --- what runs where (pure: unit-tested) ------------------------------------------------------

CHECK = ("printf 'uid=%s\\nos=%s\\ntar=%s\\nbash=%s\\nversion=%s\\narch=%s\\n' \"$(id -u)\" "
         "\"$(. /etc/os-release 2>/dev/null; echo \"${ID:-unknown}\")\" "
         "\"$(command -v tar || echo none)\" \"$(command -v bash || echo none)\" "
         "\"$(. /etc/os-release 2>/dev/null; echo \"${VERSION_ID:-unknown}\")\" "
         "\"$(dpkg --print-architecture 2>/dev/null || echo unknown)\"")


def list_command(dest: str) -> str:
    """On the host: mode, size, mtime of the NUL-separated paths on stdin, under ``dest``
    (made if missing); paths that do not exist there are left out."""
    d = shlex.quote(dest)
    return (f"mkdir -p -- {d} && cd -- {d} || exit 3; "
            "xargs -0 -r stat -c '%a %s %Y %n' -- 2>/dev/null; exit 0")


def untar_command(dest: str) -> str:
    """On the host: extract the tar stream on stdin under ``dest`` (owned by root, modes and
    mtimes as here)."""
    d = shlex.quote(dest)
    return f"mkdir -p -- {d} && tar -x -f - -C {d} --no-same-owner"


def tar_argv(source: Path) -> list[str]:
    """Here: a tar stream on stdout of the NUL-separated paths on stdin, relative to ``source``."""
    return ["tar", "-c", "-f", "-", "--format=gnu", "-C", str(source), "--no-recursion", "--null",
            "-T", "-"]


def setup_command(dest: str, cache: Path, timeout_s: float, command: str | None = None,
                  offline: str | None = None) -> str:
    """On the host: ``setup.sh`` (or ``command`` run by bash) in ``dest`` with ``JUICE_CACHE``
    (and ``JUICE_OFFLINE=offline``, the bundle's path there, when given),
    bounded by the host's ``timeout`` (``timeout_s``, SIGKILL KILL_AFTER_S later), and stopped
    (SIGTERM to ``timeout``, which passes it to its process group) as soon as ssh's stdin
    closes, i.e. when the ssh here is stopped: an ssh session without a tty gets no SIGHUP."""
    run = SETUP if command is None else f"bash -c {shlex.quote(command)}"
    env = f"JUICE_CACHE={shlex.quote(str(cache))} "
    if offline is not None:
        env += f"JUICE_OFFLINE={shlex.quote(offline)} "
    return (f"cd -- {shlex.quote(dest)} || exit 3; exec 3<&0; "
            f"{env}timeout -k {KILL_AFTER_S} "
            f"{max(1, math.ceil(timeout_s))} {run} </dev/null & job=$!; "
            '{ cat <&3; kill -TERM "$job"; } >/dev/null 2>&1 & watch=$!; '
            'exec 3<&-; wait "$job"; rc=$?; kill "$watch" 2>/dev/null; exit "$rc"')


def verify_command(dest: str, cache: Path, offline: str | None = None) -> str:
    """On the host, after setup.sh: ``scripts/verify-setup.sh`` in ``dest`` (bounded)."""
    env = f"JUICE_CACHE={shlex.quote(str(cache))} "
    if offline is not None:
        env += f"JUICE_OFFLINE={shlex.quote(offline)} "
    return (f"cd -- {shlex.quote(dest)} || exit 3; {env}timeout -k {KILL_AFTER_S} "
            f"{math.ceil(VERIFY_TIMEOUT_S)} {VERIFY} </dev/null")


_MARK = re.compile(r"\[setup \+(\d+)s\](?:\x1b\[0m)? (.*)")


def setup_phases(text: str) -> list[tuple[str, float]]:
    """setup.sh's ``[setup +Ns] what`` lines: (what, seconds until the next line), the last one
    (``ready: ...``) left out."""
    marks = [(int(m.group(1)), re.split(r": | \(", m.group(2).strip())[0][:60])
             for m in map(_MARK.search, text.splitlines()) if m]
    return [(what, float(marks[i + 1][0] - t)) for i, (t, what) in enumerate(marks[:-1])]


Stat = tuple[int, int, int]  # permission bits, size, mtime (s)


def parse_stats(text: str) -> dict[str, Stat]:
    """``list_command``'s output: path -> (mode, size, mtime)."""
    got: dict[str, Stat] = {}
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4:
            try:
                got[parts[3]] = (int(parts[0], 8), int(parts[1]), int(parts[2]))
            except ValueError:
                continue
    return got


def local_stats(source: Path, files: Sequence[str]) -> dict[str, Stat]:
    """The same triple for the files here (lstat: a symlink as itself); a file removed since it
    was listed is left out (not sent)."""
    got = {}
    for f in files:
        try:
            st = os.lstat(source / f)
        except FileNotFoundError:
            continue
        got[f] = (st.st_mode & 0o7777, st.st_size, int(st.st_mtime))
    return got


def to_send(here: dict[str, Stat], there: dict[str, Stat]) -> list[str]:
    """The paths missing on the host or differing in mode, size or mtime (rsync's quick check)."""
    return [f for f, s in here.items() if there.get(f) != s]


def tracked_files(source: Path) -> list[str]:
    """``git ls-files`` of ``source`` that exist in its working tree (UserError: not a clone)."""
    try:
        cp = subprocess.run(["git", "-C", str(source), "ls-files", "-z"], capture_output=True,
                            timeout=60, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"--source-dir {source}: git ls-files failed: {e}") from None
    if cp.returncode != 0:
        why = (cp.stderr.decode(errors="replace").strip().splitlines() or [f"exit {cp.returncode}"])[-1]
        raise UserError(f"--source-dir {source}: not a git clone ({why})")
    names = [n for n in cp.stdout.decode("utf-8", errors="surrogateescape").split("\0") if n]
    return [n for n in names if "\n" not in n and os.path.lexists(source / n)
            and not (source / n).is_dir()]


def parse_check(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def check_problem(facts: dict[str, str], user: str, bundle_arch: str | None = None) -> str | None:
    """Why a host cannot be prepared (``CHECK``'s answer), or None."""
    if not facts:
        return "no answer to the check (a login script's output?)"
    if facts.get("uid") != "0":
        return (f"logged in as {user} (uid {facts.get('uid', '?')}), not root: setup.sh installs "
                "Debian packages; give user: root and its key")
    if facts.get("os") != "debian":
        return f"not Debian (/etc/os-release ID={facts.get('os', '?')}): setup.sh needs Debian 12"
    missing = [t for t in ("tar", "bash") if facts.get(t, "none") == "none"]
    if missing:
        return f"{' and '.join(missing)} not found on the host"
    if bundle_arch is not None:  # --offline: the bundle's packages and wheels must fit the host
        if facts.get("version", "12") != "12":
            return f"Debian {facts.get('version')}, not 12: the offline bundle holds Debian 12's packages"
        if facts.get("arch", bundle_arch) != bundle_arch:
            return (f"architecture {facts.get('arch')}, the offline bundle's is {bundle_arch} (made on this "
                    "machine): prepare it from a machine of its architecture")
    return None


# --- running processes ------------------------------------------------------------------------

class Runner:
    """Starts processes (each in a session of its own) and stops them all by their record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = False

    def spawn(self, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self.stopping:
                raise Stopped
            p: subprocess.Popen[bytes] = subprocess.Popen(argv, start_new_session=True, **kw)
            self._procs[p.pid] = p
            return p

    def reap(self, p: subprocess.Popen[bytes], timeout: float) -> int:
        """Wait for ``p`` up to ``timeout``; its exit code (TimeoutExpired: it was stopped)."""
        try:
            return p.wait(timeout=timeout)
        finally:
            self.finish(p)

    def finish(self, p: subprocess.Popen[bytes]) -> None:
        """Stop ``p`` if it still runs (SIGTERM, SIGKILL after GRACE_S) and forget it."""
        if p.stdin is not None and not p.stdin.closed:
            try:
                p.stdin.close()  # a setup's watchdog on the host: ssh's stdin closed
            except OSError:
                pass
        if p.poll() is None:
            p.terminate()  # by the recorded pid (Popen knows whether it was reaped)
            try:
                p.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=GRACE_S)
        with self._lock:
            self._procs.pop(p.pid, None)

    def stop_all(self) -> None:
        """Refuse new processes and stop every recorded one still running."""
        with self._lock:
            self.stopping = True
            procs = list(self._procs.values())
        for p in procs:
            self.finish(p)


@dataclass
class Context:
    """What every host's preparation shares."""

    source: Path  # the clone here = the path on every host
    run_dir: Path  # logs and known_hosts, one per host
    cache: Path  # JUICE_CACHE on the hosts (as here)
    files: list[str]
    setup_timeout_s: float = SETUP_TIMEOUT_S
    command: str | None = None
    progress: Progress = field(default=lambda _: None)
    runner: Runner = field(default_factory=Runner)
    ssh: str = "ssh"
    bundle: Bundle | None = None  # --offline: sent to the host, setup.sh installs from it only

    @property
    def offline(self) -> str | None:
        """The bundle's path (here and on the host), or None: the host fetches for itself."""
        return None if self.bundle is None else str(self.bundle.path)

    @property
    def verify(self) -> bool:
        return self.command is None

    def log(self, t: Target) -> Path:
        return self.run_dir / f"host-{t.site}.log"

    def argv(self, t: Target, command: str) -> list[str]:
        return ssh_argv(t.host, self.run_dir / f"known_hosts-{t.site}", command, self.ssh,
                        address=t.host.address)

    @property
    def step_name(self) -> str:
        return "setup.sh" if self.command is None else "command"


class _Failed(Exception):
    def __init__(self, step: str, why: str) -> None:
        super().__init__(why)
        self.step, self.why = step, why


def _note(log: IO[bytes], text: str) -> None:
    log.write(f"--- {time.strftime('%H:%M:%S')} {text}\n".encode())
    log.flush()


def _check(t: Target, ctx: Context, log: IO[bytes]) -> None:
    _note(log, "check: reachable, root, Debian")
    p = ctx.runner.spawn(ctx.argv(t, CHECK), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        out, errb = p.communicate(timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise _Failed("check", f"no answer within {CHECK_TIMEOUT_S:.0f} s") from None
    finally:
        ctx.runner.finish(p)
    log.write(out + errb)
    log.flush()
    if p.returncode != 0:
        lines = [x for x in errb.decode(errors="replace").splitlines() if x.strip()]
        why = lines[-1] if lines else f"ssh exit {p.returncode}"
        raise _Failed("check", f"unreachable: {why}" if p.returncode == 255 else why)
    arch = None if ctx.bundle is None else ctx.bundle.info.get("arch", "")
    problem = check_problem(parse_check(out.decode(errors="replace")), t.host.user, arch or None)
    if problem:
        raise _Failed("check", problem)


def _copy(t: Target, ctx: Context, log: IO[bytes], source: Path | None = None,
          files: Sequence[str] | None = None, step: str = "copy") -> Copied:
    """The files (default: the clone's) that differ to the same path on the host; what was sent."""
    source = ctx.source if source is None else source
    files = ctx.files if files is None else files
    dest = str(source)
    names = b"\0".join(f.encode("utf-8", errors="surrogateescape") for f in files) + b"\0"
    _note(log, f"{step}: listing {len(files)} files in {dest} on the host")
    p = ctx.runner.spawn(ctx.argv(t, list_command(dest)), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=log)
    try:
        out, _ = p.communicate(names, timeout=COPY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise _Failed(step, f"listing the files timed out ({COPY_TIMEOUT_S:.0f} s)") from None
    finally:
        ctx.runner.finish(p)
    if p.returncode != 0:
        raise _Failed(step, f"cannot make or enter {dest} on the host (exit {p.returncode})")
    here = local_stats(source, files)
    send = to_send(here, parse_stats(out.decode("utf-8", "surrogateescape")))
    size = sum(here[f][1] for f in send)
    _note(log, f"{step}: {len(send)} of {len(files)} files differ ({size / 1e6:.1f} MB)")
    if not send:
        return Copied(0, len(files), 0)
    tar = ctx.runner.spawn(tar_argv(source), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=log)
    assert tar.stdin is not None and tar.stdout is not None
    try:
        ssh = ctx.runner.spawn(ctx.argv(t, untar_command(dest)), stdin=tar.stdout,
                               stdout=log, stderr=log)
    except Stopped:
        tar.stdin.close()
        ctx.runner.finish(tar)
        raise
    tar.stdout.close()  # ssh holds it now
    timeout_s = COPY_TIMEOUT_S + size / 10e6  # and 10 MB/s at worst
    deadline = time.monotonic() + timeout_s
    try:
        try:
            tar.stdin.write(b"\0".join(f.encode("utf-8", "surrogateescape") for f in send) + b"\0")
            tar.stdin.close()
        except BrokenPipeError:
            pass
        rc_ssh = ctx.runner.reap(ssh, max(1.0, deadline - time.monotonic()))
        rc_tar = ctx.runner.reap(tar, max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise _Failed(step, f"sending {len(send)} files timed out ({timeout_s:.0f} s)") from None
    finally:
        ctx.runner.finish(ssh)
        ctx.runner.finish(tar)
    if rc_tar != 0 or rc_ssh != 0:
        raise _Failed(step, f"tar here exit {rc_tar}, tar over ssh exit {rc_ssh}")
    return Copied(len(send), len(files), size)


def _setup(t: Target, ctx: Context, log: IO[bytes]) -> None:
    cmd = setup_command(str(ctx.source), ctx.cache, ctx.setup_timeout_s, ctx.command, ctx.offline)
    _note(log, f"{ctx.step_name}: {cmd}")
    # stdin: a pipe left open while it runs (closed: the host stops it, see setup_command)
    p = ctx.runner.spawn(ctx.argv(t, cmd), stdin=subprocess.PIPE, stdout=log, stderr=log)
    try:
        rc = ctx.runner.reap(p, ctx.setup_timeout_s + KILL_AFTER_S + 30.0)
    except subprocess.TimeoutExpired:
        raise _Failed(ctx.step_name, f"timed out after {ctx.setup_timeout_s / 60:.0f} min") from None
    _note(log, f"{ctx.step_name}: exit {rc}")
    if rc == 124:
        raise _Failed(ctx.step_name, f"timed out after {ctx.setup_timeout_s / 60:.0f} min (exit 124)")
    if rc == 255:
        raise _Failed(ctx.step_name, "the ssh connection failed (exit 255)")
    if rc != 0:
        raise _Failed(ctx.step_name, f"exit {rc}")


def _verify(t: Target, ctx: Context, log: IO[bytes]) -> None:
    cmd = verify_command(str(ctx.source), ctx.cache, ctx.offline)
    _note(log, f"verify: {cmd}")
    p = ctx.runner.spawn(ctx.argv(t, cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=log)
    try:
        out, _ = p.communicate(timeout=VERIFY_TIMEOUT_S + KILL_AFTER_S + 30.0)
    except subprocess.TimeoutExpired:
        raise _Failed("verify", f"no answer within {VERIFY_TIMEOUT_S:.0f} s") from None
    finally:
        ctx.runner.finish(p)
    log.write(out)
    log.flush()
    if p.returncode != 0:
        bad = [x.removeprefix("verify: FAILED: ") for x in out.decode(errors="replace").splitlines()
               if "FAILED" in x]
        raise _Failed("verify", "; ".join(bad[:2]) or f"exit {p.returncode}")


def prepare_host(t: Target, ctx: Context) -> Outcome:
    """check, copy, (bundle,) setup, verify on one host; the outcome (Stopped: the run is being
    stopped)."""
    start = time.monotonic()
    log_path = ctx.log(t)
    o = Outcome(t, False, "check", 0.0, log_path)

    def timed(step: str, run: Callable[[], None]) -> None:
        o.step = step
        t0 = time.monotonic()
        try:
            run()
        finally:
            o.steps[step] = time.monotonic() - t0

    def copy_clone() -> None:
        o.copied["clone"] = _copy(t, ctx, log)
        o.sent = o.copied["clone"].sent

    def copy_bundle() -> None:
        assert ctx.bundle is not None
        o.copied["bundle"] = _copy(t, ctx, log, ctx.bundle.path, ctx.bundle.files, "bundle")

    with log_path.open("ab") as log:
        _note(log, f"{t.name}: prepare {ctx.source} (JUICE_CACHE={ctx.cache}"
                   + (f", offline from {ctx.offline})" if ctx.offline else ")"))
        try:
            ctx.progress(f"{t.name}: check (log: {log_path})")
            timed("check", lambda: _check(t, ctx, log))
            ctx.progress(f"{t.name}: copy {ctx.source}")
            timed("copy", copy_clone)
            if ctx.bundle is not None:
                ctx.progress(f"{t.name}: copy the offline bundle {ctx.bundle.path} "
                             f"({len(ctx.bundle.files)} files, {ctx.bundle.megabytes:.0f} MB)")
                timed("bundle", copy_bundle)
            ctx.progress(f"{t.name}: copied {o.copy_summary()}; {ctx.step_name} ... (log: {log_path})")
            start_setup = log_path.stat().st_size
            try:
                timed(ctx.step_name, lambda: _setup(t, ctx, log))
            finally:
                with log_path.open("rb") as f:
                    f.seek(start_setup)
                    o.phases = setup_phases(f.read().decode(errors="replace"))
            if ctx.verify:
                timed("verify", lambda: _verify(t, ctx, log))
        except _Failed as e:
            if ctx.runner.stopping:
                e.why = f"stopped (Ctrl-C) ({e.why})"
            _note(log, f"FAILED at {e.step}: {e.why}")
            ctx.progress(f"{t.name}: FAILED at {e.step}: {e.why}")
            o.step, o.why, o.seconds = e.step, e.why, time.monotonic() - start
            return o
        except OSError as e:  # e.g. ssh or tar missing here
            _note(log, f"FAILED at {o.step}: {e}")
            ctx.progress(f"{t.name}: FAILED at {o.step}: {e}")
            o.why, o.seconds = str(e), time.monotonic() - start
            return o
        o.ok, o.step, o.seconds = True, "done", time.monotonic() - start
        _note(log, f"done in {o.seconds:.1f} s: copied {o.copy_summary()}; {o.step_summary()}")
        if o.phases:
            _note(log, f"{ctx.step_name}: " + ", ".join(f"{w} {s:.0f} s" for w, s in o.phases))
    ctx.progress(f"{t.name}: done in {o.seconds:.1f} s ({o.step_summary()})")
    return o


def host_bound_s(ctx: Context) -> float:
    """The longest one host's preparation can take (every step at its timeout)."""
    bundle = 0.0 if ctx.bundle is None else 2 * COPY_TIMEOUT_S + ctx.bundle.bytes / 10e6
    return (CHECK_TIMEOUT_S + 2 * COPY_TIMEOUT_S + bundle + ctx.setup_timeout_s + VERIFY_TIMEOUT_S
            + 2 * KILL_AFTER_S + 120.0 + 10 * GRACE_S)


def prepare_all(targets: Sequence[Target], ctx: Context, parallel: int = 10) -> list[Outcome]:
    """Every target prepared, ``parallel`` at a time; the outcomes in the targets' order.
    Ctrl-C (KeyboardInterrupt) stops every recorded process, waits for the threads, re-raises."""
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    workers = max(1, min(parallel, len(targets)))
    bound = host_bound_s(ctx) * math.ceil(len(targets) / workers) + 60.0
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="juice-prepare")
    futures: dict[Future[Outcome], Target] = {}
    try:
        futures = {pool.submit(prepare_host, t, ctx): t for t in targets}
        pending = set(futures)
        deadline = time.monotonic() + bound
        while pending and time.monotonic() < deadline:  # bounded; wakes each second for Ctrl-C
            _, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
        if pending:
            raise TimeoutError(f"prepare: hosts still running after {bound:.0f} s")
    except BaseException:
        ctx.runner.stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    done = {futures[f].site: f.result() for f in futures}
    return [done[t.site] for t in targets]
