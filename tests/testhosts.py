"""Test hosts that are separate where it matters: each has its own root filesystem, processes,
clock and sshd, and sits in a lab site's network namespace (the WAN emulated between sites is
between hosts).

    with test_hosts(3, tmp, offsets=[0.0, +3.0, -2.0]) as (lab, hosts):   # hosts: StaticHost
        ...                                        # site k = hosts[k-1], reached over ssh only

A host (``scripts/bare.sh host``, started here inside the site's namespace):
- root filesystem: an overlay of read-only layers (top first) — the prepared layer (below, when
  ``prepared=True``), the hosts' layer (``bare.sh hostlayer``: python3, libfaketime, iproute2,
  procps from Debian) and the bare Debian 12 image (``bare.sh image``: debootstrap + sshd, git,
  ca-certificates) — with its upper and work directories in HOSTS_DIR/<run>/h<k>, removed
  after. pivot_root into it: nothing of this machine's file system is reachable (not its
  /var/cache/juice, not this clone); /dev, /run, /tmp, /dev/shm of its own;
- its own mount and PID namespaces, its own sshd (port 22 on the site's address) as the PID
  namespace's first process;
- its own clock: every process of the host loads libfaketime (Debian's 0.9.10) through the
  host's /etc/ld.so.preload, after scripts/faketime-sleep.c, with the offset in
  /etc/faketimerc (e.g. "+3s"): time.time(), clock_gettime(CLOCK_REALTIME), gettimeofday, date
  all shifted, whatever the process's environment (Juice's agent starts servers with a clean
  one). CLOCK_MONOTONIC is NOT shifted (the shim makes libfaketime see
  FAKETIME_DONT_FAKE_MONOTONIC=1): a real host's monotonic clock is never compared across
  hosts, and with it shifted libfaketime 0.9.10 hangs Python's timed lock waits; the shim also
  mends that mode's EINVAL on absolute monotonic sleeps (Python's time.sleep) and keeps
  libfaketime from unlinking its shared memory, which sshd's seccomp filter punishes with
  SIGSYS. Go binaries (the WAN delayer) read the real clock through the vDSO: they only
  measure durations. The build host of the prepared layer has no offset (no preload).

Stopping: the recorded pid (``unshare --kill-child``, SIGKILL: unshare ignores SIGTERM) takes
the host's sshd with it, and the kernel ends every process of the PID namespace with it; the
mounts go with the mount namespace; then the directory is removed. On success, failure and
Ctrl-C (the ``with``), at a crash of the test process (the hosts' unshare gets SIGKILL as its
parent dies: PR_SET_PDEATHSIG), and swept at the next start (a run directory whose owner pid
is gone: its recorded pids killed, its directory removed). The lab is a local lab of a random
name (``juice-th…`` namespaces, swept by Juice itself and by ``sweep`` here).

``prepared=True``: the hosts also have what ``juice hosts prepare`` installs (Debian packages,
the venvs in /var/cache/juice, the native helpers, this clone at its own path), from a cached
layer made ONCE per key (the inputs of scripts/setup.sh: its scripts, the locks, native/, the
pyproject files; this clone's path; the image's date) by
``juice hosts prepare``'s own steps
(``juice.hosts.prepare``: check, copy, setup.sh, verify — with this working tree's files,
tracked or not yet, where the CLI sends the tracked ones) on a build host (the same kind of
host, in this machine's network namespace, so setup.sh reaches the registries as this
machine does: measured 479-514 s, 3.1-3.3 GB, at loads of 7-27 on 2 cores, 272 s with the
Debian packages of an earlier build too: benchmarks/hosts.md); each fixture then
brings the hosts' copy of the clone up to date with the same copy step (only the files that
differ are sent; 1-2 s for 3 hosts).

The build host, and it only, shares this machine's download caches (``download_caches``):
uv's cache, the Go module and build caches and the Debian packages earlier builds fetched
(plus the .debs this machine's apt kept) are bind-mounted into it, and the pinned Go
toolchain is copied into its own cache, so its setup.sh downloads only what this machine
never fetched; the mount points stay empty in the layer (a test host sees nothing of this
machine's /var/cache/juice). In the suite the build starts in the background as collection
ends, and the tests that need the layer are ordered after the time it takes
(tests/parallel.py; ``start_build``); they wait for it on the build lock if it is late.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juice.lab import LocalLab
from juice.lab import spec as labspec
from juice.lab.provider import StaticHost
from juice.util import proc

CLONE = Path(__file__).resolve().parents[1]
BARE = CLONE / "scripts" / "bare.sh"
CACHE = Path(os.environ.get("JUICE_CACHE", "/var/cache/juice"))
LAYERS = CACHE / "bare" / "layers"
HOSTS_DIR = Path("/var/tmp/juice-testhosts")  # run directories (upper/work per host), swept
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SLEEP_FIX = "/usr/local/lib/juice/faketime-sleep.so"  # scripts/faketime-sleep.c
START_TIMEOUT_S = 30.0
PREPARE_TIMEOUT_MIN = 30


def available() -> str | None:
    """None when test hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (namespaces, overlay mounts)"
    for tool in ("unshare", "debootstrap", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None and not (tool == "debootstrap" and _image_made()):
            return f"{tool} not found (scripts/setup.sh installs it)"
    return None


def _image_made() -> bool:
    return (CACHE / "bare" / "bookworm" / ".juice-made").exists()


def _bare(cmd: str, timeout: float = 1800) -> Path:
    cp = subprocess.run(["bash", str(BARE), cmd], capture_output=True, text=True, timeout=timeout,
                        stdin=subprocess.DEVNULL, check=False)
    if cp.returncode != 0:
        raise RuntimeError(f"bash scripts/bare.sh {cmd} failed: {cp.stderr[-2000:]}")
    return Path(cp.stdout.strip().splitlines()[-1])


def base_layers() -> list[str]:
    """The hosts' layer and the image (made and cached by bare.sh on first use)."""
    layer = _bare("hostlayer")
    return [str(layer), str(CACHE / "bare" / "bookworm")]


# ---- one host ---------------------------------------------------------------------------------

def offset_text(offset_s: float) -> str:
    """libfaketime's relative offset: "+3s", "-2.5s", "+0s"."""
    return f"{offset_s:+g}s"


def _write_root(upper: Path, *, listen: str, port: int, keys: Path, offset_s: float | None) -> None:
    """What the host's root gets on top of its layers: sshd's config and keys, the clock."""
    (upper / "etc" / "ssh").mkdir(parents=True, exist_ok=True)
    (upper / "root" / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copyfile(keys / "host", upper / "etc" / "ssh" / "juice_host_key")
    os.chmod(upper / "etc" / "ssh" / "juice_host_key", 0o600)
    shutil.copyfile(keys / "client.pub", upper / "root" / ".ssh" / "authorized_keys")
    conf = (f"Port {port}\nListenAddress {listen}\nHostKey /etc/ssh/juice_host_key\nPidFile none\n"
            "UsePAM no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nMaxStartups 100:30:200\nMaxSessions 100\n")
    if offset_s is not None:  # every process of the host, whatever its environment
        (upper / "etc" / "ld.so.preload").write_text(f"{SLEEP_FIX}\n{FAKETIME}\n")
        (upper / "etc" / "faketimerc").write_text(offset_text(offset_s) + "\n")
    (upper / "etc" / "ssh" / "juice_sshd_config").write_text(conf)


def _die_with_parent() -> None:  # preexec_fn: SIGKILL when the test process dies
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Running:
    """One started host: its directory and the recorded pid (unshare) with its start time."""

    dir: Path
    pid: int
    start: int | None
    popen: subprocess.Popen[bytes] | None = None


def start_host(dir: Path, lowers: Sequence[str], argv_prefix: Sequence[str] = (),
               binds: Sequence[str] = ()) -> Running:
    """``bare.sh host`` in the background (``argv_prefix``: e.g. ``ip netns exec NS``; ``binds``:
    ``SRC=DST``, this machine's SRC at DST in the host: the build host's download caches only)."""
    for d in ("upper", "work", "root"):
        (dir / d).mkdir(parents=True, exist_ok=True)
    log = open(dir / "host.log", "ab")  # noqa: SIM115 (the child holds it)
    try:
        p = subprocess.Popen([*argv_prefix, "bash", str(BARE), "host", str(dir), ":".join(lowers), *binds],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                             preexec_fn=_die_with_parent)
    finally:
        log.close()
    return Running(dir, p.pid, proc.start_time(p.pid), p)


def stop_host(r: Running) -> None:
    """SIGKILL to the recorded pid (if it is still that process); wait for it."""
    if proc.alive(r.pid, r.start):
        with contextlib.suppress(OSError):
            os.kill(r.pid, signal.SIGKILL)
    if r.popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            r.popen.wait(timeout=10)
    deadline = time.monotonic() + 10
    while proc.alive(r.pid, r.start) and time.monotonic() < deadline:
        time.sleep(0.05)


def _remove(d: Path) -> None:
    """rm -rf, retried briefly: the overlay is unmounted when the host's last process is gone."""
    for _ in range(50):
        shutil.rmtree(d, ignore_errors=True)
        if not d.exists():
            return
        time.sleep(0.1)
    shutil.rmtree(d)


def keys(tmp: Path) -> None:
    for key in ("host", "client"):
        if not (tmp / key).exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"juice-test-{key}",
                            "-f", str(tmp / key)], check=True, timeout=30)


# ---- run directories: recorded, swept ---------------------------------------------------------

def _run_dir(name: str) -> Path:
    HOSTS_DIR.mkdir(parents=True, exist_ok=True)
    d = HOSTS_DIR / f"juice-{name}-{os.getpid()}-{secrets.token_hex(2)}"
    d.mkdir()
    _save(d, [])
    return d


def _save(d: Path, hosts: list[Running], lowers: Sequence[str] = ()) -> None:
    tmp = d / ".state.json.tmp"
    tmp.write_text(json.dumps({"owner": [os.getpid(), proc.start_time(os.getpid())],
                               "hosts": [[r.pid, r.start] for r in hosts], "lowers": list(lowers)}))
    os.replace(tmp, d / "state.json")


def _in_use() -> set[str]:
    """The layers that hosts of live test processes have under them."""
    used: set[str] = set()
    for d in HOSTS_DIR.glob("juice-*"):
        try:
            st = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            continue
        if proc.alive(int(st["owner"][0]), st["owner"][1]):
            used.update(st.get("lowers", []))
    return used


STALE_AFTER_S = 86400.0  # another key's layer unused this long is removed (another clone's too)


def _drop_stale_prepared(keep: Path) -> None:
    """Prepared layers of other keys (setup.sh's inputs changed since): this clone's at once,
    any clone's once a day old, unless a live test's hosts have them under them (3.3 GB each)."""
    used = _in_use()
    for d in LAYERS.glob("prepared-*"):
        try:
            clone = json.loads((d / ".juice-prepared").read_text()).get("clone")
            age = time.time() - (d / ".juice-prepared").stat().st_mtime
        except (OSError, ValueError):
            continue
        if d != keep and str(d) not in used and (clone == str(CLONE) or age > STALE_AFTER_S):
            shutil.rmtree(d, ignore_errors=True)


def _clone_link(hosts: Sequence[StaticHost], tmp: Path, layer: Path) -> None:
    """When the prepared layer was made by a clone at another path: that path, on each host, as a
    link to this clone's (where ``sync_clone`` copied this clone's files), so the venvs'
    editable installs made there import this clone's code. Made over ssh once the host is up:
    a path under /tmp is on the host's own tmpfs, which hides anything the layers hold there."""
    try:
        made_at = json.loads((layer / ".juice-prepared").read_text()).get("clone")
    except (OSError, ValueError):
        return
    if not made_at or made_at == str(CLONE):
        return
    old = shlex.quote(str(made_at))
    for h in hosts:
        ssh(h, tmp, f"mkdir -p \"$(dirname {old})\" && rm -rf {old} && ln -s {shlex.quote(str(CLONE))} {old}")


def sweep() -> list[str]:
    """Remove the run directories (and kill the hosts) of test processes that are gone, and the
    labs whose owner died (what any `juice` command does first)."""
    from juice.lab import state
    from juice.lab.local import sweep as sweep_labs

    if state.labs_dir().is_dir():
        with state.locked():
            sweep_labs()
    removed: list[str] = []
    if not HOSTS_DIR.is_dir():
        return removed
    for d in HOSTS_DIR.glob("juice-*"):
        try:
            st = json.loads((d / "state.json").read_text())
            owner = st["owner"]
        except (OSError, ValueError, KeyError):
            if time.time() - d.stat().st_mtime < 60:  # being made right now
                continue
            st, owner = {"hosts": []}, [0, None]
        if owner[0] and proc.alive(int(owner[0]), owner[1]):
            continue
        for pid, start in st.get("hosts", []):
            stop_host(Running(d, int(pid), start))
        _remove(d)
        removed.append(d.name)
    return removed


# ---- the prepared layer ---------------------------------------------------------------------

# scripts that setup.sh does not run: editing them keeps the prepared layer
NOT_SETUP = {"scripts/bare.sh", "scripts/faketime-sleep.c", "scripts/test.sh", "scripts/test-deps.sh",
             "scripts/quickstart.sh"}


def prepared_key() -> str:
    """What the prepared state depends on: scripts/setup.sh's inputs (the scripts it runs, the
    locks, native/, the pyproject files, tracked or not), the image's date (the hosts' layer
    adds only packages) and this clone's path: the venvs' editable installs point there, and a
    host's setup.sh reinstalls Juice (from the network) when they point elsewhere — tried with a
    layer shared across clone paths through a link (``_clone_link``, kept for layers made
    before): the studies ran, a host's setup.sh did not."""
    files = subprocess.run(["git", "-C", str(CLONE), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard", "scripts", "native", "pyproject.toml", "plugins"],
                           capture_output=True, check=True, timeout=60).stdout.split(b"\0")
    image = CACHE / "bare" / "bookworm"
    h = hashlib.sha256(str(CLONE).encode() + b"\0" + (image / ".juice-made").read_bytes())
    for f in sorted(set(files) - {b""}):
        name = f.decode(errors="surrogateescape")
        if name in NOT_SETUP or (name.startswith("plugins/") and not name.endswith("pyproject.toml")):
            continue
        p = CLONE / name
        if p.is_file():
            h.update(f + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(addr: str, port: int, running: Running, timeout: float = START_TIMEOUT_S,
               ns: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ns is None:
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((addr, port)) == 0:
                    return
        else:
            cp = subprocess.run(["ip", "netns", "exec", ns, "bash", "-c", f"exec 3<>/dev/tcp/{addr}/{port}"],
                                capture_output=True, timeout=10, check=False)
            if cp.returncode == 0:
                return
        if not proc.alive(running.pid, running.start):
            break
        time.sleep(0.05)
    log = (running.dir / "host.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"test host in {running.dir}: sshd not listening on {addr}:{port} ({log})")


FAILED_FOR_S = 1800.0  # a failed build is not retried by every test for this long


def prepared_layer(progress: Any = lambda _: None) -> Path:
    """The layer with what ``juice hosts prepare`` installs; made once per ``prepared_key``
    (or waited for: the suite starts its build in the background, ``start_build``). The image
    and the hosts' layer are made first when missing (the key reads the image's date: on a fresh
    machine the background build failed at once without them, and the tests built the layer
    themselves, holding their workers)."""
    base_layers()
    key = prepared_key()
    out = LAYERS / f"prepared-{key}"
    failed = LAYERS / f".prepared-{key}.failed"
    LAYERS.mkdir(parents=True, exist_ok=True)
    with open(LAYERS / ".prepared.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others wait and reuse it
        if (out / ".juice-prepared").exists():
            return out
        with contextlib.suppress(OSError):  # a build of this key failed a moment ago: its reason
            if time.time() - failed.stat().st_mtime < FAILED_FOR_S:
                raise RuntimeError(f"the prepared layer {key} failed to build "
                                   f"{time.time() - failed.stat().st_mtime:.0f} s ago (not retried for "
                                   f"{FAILED_FOR_S:.0f} s; remove {failed} to retry): "
                                   + failed.read_text()[-3000:])
        try:
            _build_prepared(out, key, progress)
        except Exception as e:
            failed.write_text(f"{type(e).__name__}: {e}")
            raise
        failed.unlink(missing_ok=True)
    return out


def prepared_ready() -> bool:
    """The prepared layer of this clone's current inputs is made already (no build needed)."""
    try:
        return (LAYERS / f"prepared-{prepared_key()}" / ".juice-prepared").exists()
    except (OSError, subprocess.SubprocessError):  # no image yet, no git
        return False


# ---- the build in the background (the suite: tests/parallel.py) -------------------------------

BUILD_LOG = LAYERS / ".build.log"


def start_build() -> subprocess.Popen[bytes]:
    """``prepared_layer()`` in a process of its own (``python -m tests.testhosts build``), its
    output in BUILD_LOG: it holds the build lock, so a test that needs the layer waits for it
    (``prepared_layer``) and does not build it a second time. It ends gracefully (host stopped,
    directory removed) on SIGTERM, and gets SIGTERM when its parent dies."""
    LAYERS.mkdir(parents=True, exist_ok=True)
    log = open(BUILD_LOG, "ab")  # noqa: SIM115 (the child holds it)
    try:
        return subprocess.Popen([sys.executable, "-m", "tests.testhosts", "build"], cwd=CLONE,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                preexec_fn=lambda: ctypes.CDLL(None).prctl(1, signal.SIGTERM))
    finally:
        log.close()


def stop_build(p: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """The background build, stopped by its recorded pid: SIGTERM, SIGKILL after ``grace_s``."""
    if p.poll() is None:
        with contextlib.suppress(OSError):
            p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)


def _build_main() -> int:
    def term(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, term)
    t0 = time.monotonic()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"{stamp} background build of the prepared layer (pid {os.getpid()})", flush=True)
    try:
        out = prepared_layer(lambda m: print(m, flush=True))
    except KeyboardInterrupt:
        print("stopped (SIGTERM)", flush=True)
        return 130
    except Exception as e:  # the tests that need the layer say why (the .failed file)
        print(f"failed: {e}", flush=True)
        return 1
    print(f"ready: {out} ({time.monotonic() - t0:.0f} s, waited for or built)", flush=True)
    return 0


def _build_prepared(out: Path, key: str, progress: Any) -> None:
    sweep()
    lowers = base_layers()
    d = _run_dir(f"build-{key}")
    tmp = d / "keys"
    tmp.mkdir()
    keys(tmp)
    port = _free_port()
    _write_root(d / "h1" / "upper", listen="127.0.0.1", port=port, keys=tmp, offset_s=None)
    t0 = time.monotonic()
    binds, seeded = download_caches(d / "h1" / "upper")
    r = start_host(d / "h1", lowers, binds=binds)
    _save(d, [r], lowers)
    try:
        _wait_port("127.0.0.1", port, r)
        progress(f"test hosts: preparing a host with `juice hosts prepare` for the prepared layer {key} "
                 f"(this machine's download caches shared: {', '.join(binds + seeded) or 'none'})")
        # juice hosts prepare's own steps (juice.hosts.prepare: check, copy, setup.sh, verify),
        # with this working tree's files (tracked and not yet tracked: what the tests test)
        build = StaticHost(address="127.0.0.1", port=port, user="root", key_file=str(tmp / "client"))
        [o] = _prepare([build], d / "logs", command=None)
        logs = [o.log]
        if not o.ok:
            raise RuntimeError(f"juice hosts prepare failed on the build host at {o.step}: {o.why}; "
                               f"log {o.log}: " + " | ".join(o.tail()))
        took = time.monotonic() - t0
    except BaseException:
        stop_host(r)
        _remove(d)
        raise
    stop_host(r)
    upper = d / "h1" / "upper"
    # what is the build host's own, not the prepared state's
    for b in binds:  # the mount points of the shared caches: empty directories, dropped
        q = upper / b.partition("=")[2].lstrip("/")
        with contextlib.suppress(OSError):
            q.rmdir()
    for p in ("etc/ssh/juice_sshd_config", "etc/ssh/juice_host_key", "root/.ssh", "var/tmp/juice-host"):
        q = upper / p
        if q.is_dir() and not q.is_symlink():
            shutil.rmtree(q)
        elif q.exists() or q.is_symlink():
            q.unlink()
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (upper / ".juice-prepared").write_text(json.dumps({"key": key, "clone": str(CLONE),
                                                       "seconds": round(took, 1), "made": made}))
    if logs:
        shutil.copyfile(logs[-1], upper / ".juice-prepare.log")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(upper, out)
    _remove(d)
    _drop_stale_prepared(out)  # another clone's layers are left alone
    progress(f"test hosts: prepared layer {out} made in {took:.0f} s")


# what the build host downloads, shared with this machine (never with a test host)
DEBS = CACHE / "bare" / "debs"  # Debian packages the build hosts downloaded (apt's archives there)
APT_ARCHIVES = Path("/var/cache/apt/archives")


def download_caches(upper: Path) -> tuple[list[str], list[str]]:
    """This machine's download caches for the build host, so that its setup.sh fetches only what
    this machine has not fetched already: (``SRC=DST`` bind mounts, what was copied into the
    build host's ``upper``).

    - uv's cache (``$JUICE_CACHE/uv-cache``: the locked wheels, and the wheels uv built from
      sdists), bind-mounted at the same path: uv locks it (it is made for concurrent use),
      reads what is there and adds what it fetched; the venvs are copies (another mount: no
      hard link into this machine's cache);
    - the Go module and build caches (``$JUICE_CACHE/go/mod``, ``go/cache``), bind-mounted;
    - the pinned Go toolchain (``go/toolchain/<version>``, checked against the pin by
      scripts/go-toolchain.sh as it is there), COPIED into the host's own cache: a prepared
      host keeps it (setup.sh run again on a test host, which reaches no registry, needs it);
    - Debian's packages: DEBS, bind-mounted at the host's /var/cache/apt/archives, first given
      (hard links) the .debs this machine's apt kept in its own /var/cache/apt/archives (none
      where apt is set to delete them, as in Debian's container images: then DEBS holds only
      what earlier builds downloaded).
    The host's mount points stay empty in the layer; nothing of the caches is in it but the
    toolchain."""
    from juice.paths import cache_dir

    cache = cache_dir()
    binds = []
    for sub in ("uv-cache", "go/mod", "go/cache"):
        if (cache / sub).is_dir():
            binds.append(f"{cache / sub}={cache / sub}")
    DEBS.mkdir(parents=True, exist_ok=True)
    (DEBS / "partial").mkdir(exist_ok=True)
    for deb in APT_ARCHIVES.glob("*.deb"):
        if not (DEBS / deb.name).exists():
            with contextlib.suppress(OSError):
                try:
                    os.link(deb, DEBS / deb.name)
                except OSError:
                    shutil.copy2(deb, DEBS / deb.name)
    binds.append(f"{DEBS}={APT_ARCHIVES}")
    seeded = []
    for tc in (cache / "go" / "toolchain").glob("go*"):
        if (tc / ".juice-sum").is_file() and (tc / "bin" / "go").is_file():
            dest = upper / str(tc).lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", "--reflink=auto", str(tc), str(dest)], check=True, timeout=600)
            seeded.append(f"{tc} (copied)")
    return binds, seeded


# ---- the fixture --------------------------------------------------------------------------------

@contextmanager
def test_hosts(n: int, tmp: Path, offsets: Sequence[float | None] | None = None, *, prepared: bool = False,
               delay_ms: float = 0.0, progress: Any = lambda _: None,
               ) -> Iterator[tuple[LocalLab, list[StaticHost]]]:
    """``n`` hosts in the sites of a fresh local lab (``delay_ms`` one-way between them), host k
    with clock offset ``offsets[k-1]`` seconds (default: all 0, still faked: its own clock; None:
    no libfaketime at all — redis-server, whose jemalloc reads the clock while libfaketime 0.9.10
    initialises, aborts under it: "unexpected recursive calls to clock_gettime()")."""
    from juice.services.openstack.keystone_publish import start_forwarder

    offs: list[float | None] = list(offsets) if offsets is not None else [0.0] * n
    assert len(offs) == n
    tmp.mkdir(parents=True, exist_ok=True)
    keys(tmp)
    sweep()
    lowers = base_layers()
    layer = prepared_layer(progress) if prepared else None
    if layer is not None:
        lowers = [str(layer), *lowers]
    run = _run_dir("hosts")
    started: list[Running] = []
    with ExitStack() as stack:
        stack.callback(_remove, run)
        # a random name: a process may have several sets of hosts at once (uniform_lab's names
        # are per process)
        ls = labspec.parse({"name": f"th{secrets.token_hex(3)}", "sites": n, "delay_ms": delay_ms})
        lab = stack.enter_context(LocalLab.up(ls, ephemeral=True, progress=progress))
        stack.callback(lambda: [stop_host(r) for r in started])  # before the lab goes
        for k in lab.sites:
            hd = run / f"h{k}"
            _write_root(hd / "upper", listen=lab.site_ip(k), port=22, keys=tmp, offset_s=offs[k - 1])
            started.append(start_host(hd, lowers, ["ip", "netns", "exec", lab.site_ns(k)]))
            _save(run, started, lowers)
        hosts = []
        for k, r in zip(lab.sites, started, strict=True):
            _wait_port(lab.site_ip(k), 22, r, ns=lab.site_ns(k))
            fwd, port = start_forwarder(lab, k, 22, tmp)
            stack.callback(fwd.stop, 2.0)
            hosts.append(StaticHost(address="127.0.0.1", port=port, user="root", key_file=str(tmp / "client"),
                                    wan_address=lab.site_ip(k)))
        if prepared:
            sync_clone(hosts, tmp / "sync")
            if layer is not None:
                _clone_link(hosts, tmp, layer)
        yield lab, hosts


def worktree_files() -> list[str]:
    """This clone's files as the tests see them: tracked, and not yet tracked (not ignored)."""
    cp = subprocess.run(["git", "-C", str(CLONE), "ls-files", "-z", "--cached", "--others",
                         "--exclude-standard"], capture_output=True, check=True, timeout=60)
    names = sorted({n for n in cp.stdout.decode("utf-8", "surrogateescape").split("\0") if n})
    return [n for n in names if "\n" not in n and os.path.lexists(CLONE / n) and not (CLONE / n).is_dir()]


def _prepare(hosts: Sequence[StaticHost], run_dir: Path, command: str | None) -> list[Any]:
    from juice.hosts import prepare as prep
    from juice.paths import cache_dir

    ctx = prep.Context(source=CLONE, run_dir=run_dir, cache=cache_dir(), files=worktree_files(),
                       command=command, setup_timeout_s=PREPARE_TIMEOUT_MIN * 60)
    return prep.prepare_all([prep.Target(k, h) for k, h in enumerate(hosts, 1)], ctx)


def sync_clone(hosts: Sequence[StaticHost], run_dir: Path) -> list[int]:
    """This working tree's files that differ from the prepared layer's copy, to every host
    (``juice.hosts.prepare``'s copy step; the command run after it: ``true``)."""
    outs = _prepare(hosts, run_dir, "true")
    bad = [o for o in outs if not o.ok]
    if bad:
        raise RuntimeError(f"bringing the hosts' clone up to date failed: {bad[0].target.name}: "
                           f"{bad[0].step}: {bad[0].why} ({bad[0].tail()})")
    return [o.sent for o in outs]


def ssh(h: StaticHost, tmp: Path, command: str, timeout: float = 60) -> str:
    """One command on a test host by plain ssh (what a user would check by hand)."""
    cp = subprocess.run(["ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                         "-o", f"UserKnownHostsFile={tmp / 'known_hosts'}", "-o", "LogLevel=ERROR",
                         "-p", str(h.port), "-l", h.user, "-i", str(h.key_file), h.address, command],
                        capture_output=True, text=True, timeout=timeout, check=False)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


if __name__ == "__main__":  # python -m tests.testhosts build: the suite's background build
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m tests.testhosts build")
    sys.exit(_build_main())
