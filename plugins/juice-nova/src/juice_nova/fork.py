"""One nova-compute per simulated node, forked from a parent that imported nova once.

    juice-nova-compute --fork-nodes DIR1 DIR2 ... --pids-file PIDS.json

Each ``DIR`` is one simulated node's state directory, written by Juice: ``DIR/nova.conf`` (its
own ``[DEFAULT] host`` and ``state_path = DIR``), ``DIR/juice-nodes.json`` (ONE node),
``DIR/compute_id``. The parent does only what ``nova.cmd.compute`` does before the config is
parsed, plus imports: ``monkey_patch.patch`` (threading), the juice driver registered as
``nova.virt.juice_fake``, ``nova.cmd.compute`` and the modules nova-compute loads later (the
compute manager, the fake driver, the RabbitMQ driver...: ``HEAVY``); then ``gc.freeze()`` (the
imported objects leave the collector's generations: a child's collections do not touch, hence
do not copy, their pages) and one ``fork`` per node. No thread, socket, logging handler or
parsed configuration exists before the fork (``check_clean`` refuses to fork otherwise), and a
child closes every inherited file descriptor but stdio.

Each child (``run_child``): dies with the parent (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), gets
stdin from /dev/null and stdout/stderr appended to ``DIR/<basename DIR>.log``, works in ``DIR``
and runs nova's own ``nova.cmd.compute.main()`` unchanged with ``--config-file DIR/nova.conf``:
its own service record and heartbeat, RPC topic ``compute.<host>``, resource tracker and claim
lock, build slots (``max_concurrent_builds``), RPC executor — what a real hypervisor has to
itself. It never returns into the parent's code (``os._exit``).

The parent writes ``{"parent": pid, "children": {"<host>": pid, ...}}`` to ``--pids-file``
(atomically) once every child is forked, then waits. TERM (or INT) is forwarded to every
child; after ``--grace`` seconds (default 20) the ones left get KILL; once all are reaped the
parent exits 0. A child that exits on its own (a node that cannot start) makes the parent stop
the others and exit 1, so a supervisor that watches the parent sees the failure.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
GRACE_S = 20.0
# Imported in the parent so the children share their pages (copy-on-write); what a child
# imports anyway after the fork, found with `python -X importtime` of a 1-node nova-compute.
HEAVY = ("nova.compute.manager", "nova.compute.resource_tracker", "nova.scheduler.client.report",
         "nova.virt.fake", "nova.objects", "nova.network.neutron", "nova.image.glance",
         "nova.volume.cinder", "nova.servicegroup.drivers.db", "oslo_messaging._drivers.impl_rabbit",
         "kombu.transport.pyamqp", "keystoneauth1.loading", "keystonemiddleware.auth_token",
         "os_vif", "os_brick", "oslo_privsep.priv_context", "oslo_reports.guru_meditation_report",
         # what os_vif.initialize() loads in the child (its objects, its plugins, pyroute2), found
         # with PYTHONPROFILEIMPORTTIME=1 in a forked child's log
         "os_vif.objects.vif", "os_vif.objects.host_info", "os_vif.objects.instance_info",
         "os_vif.objects.network", "os_vif.objects.route", "os_vif.objects.subnet",
         "os_vif.objects.fixed_ip", "pyroute2", "vif_plug_ovs.ovs",
         "vif_plug_linux_bridge.linux_bridge", "vif_plug_noop.noop", "librabbitmq",
         # the 11 modules a forked child still imported after the fork (its sys.modules at 20 s
         # against the parent's): the notifier drivers, the CPU monitor, keystoneauth's plugins
         "_strptime", "netrc", "dogpile.cache.backends.null", "nova.compute.monitors.cpu.virt_driver",
         "keystoneauth1.loading._plugins.identity.generic", "oslo_messaging.notify._impl_log",
         "oslo_messaging.notify._impl_noop",
         # the simulated ovn-controller (with the real neutron: each child opens its own SB
         # connection after the fork) and the library it uses
         "juice_nova.ovn", "ovsdbapp.backend.ovs_idl.connection", "ovsdbapp.schema.ovn_southbound.impl_idl",
         # the simulated neutron-openvswitch-agent (ML2/OVS: its RabbitMQ connection after the fork)
         "juice_nova.ovs")


class UsageError(Exception):
    """Bad arguments or nodes directories: one line, exit 2."""


@dataclass(frozen=True)
class Child:
    """One simulated node: its state directory, config file and log."""

    host: str
    home: Path

    @property
    def config(self) -> Path:
        return self.home / "nova.conf"

    @property
    def log(self) -> Path:
        return self.home / f"{self.home.name}.log"


@dataclass(frozen=True)
class Args:
    children: tuple[Child, ...]
    pids_file: Path
    grace_s: float = GRACE_S


def host_of(conf: str) -> str | None:
    """``[DEFAULT] host`` of a nova.conf text (None when absent), without oslo.config: the
    parent must parse no configuration before the fork."""
    section = ""
    for raw in conf.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == "DEFAULT" and "=" in line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            if key.strip() == "host":
                return value.strip() or None
    return None


def parse_args(argv: list[str]) -> Args:
    """``--fork-nodes DIR... --pids-file PATH [--grace SECONDS]`` (UsageError: one line)."""
    dirs: list[str] = []
    pids: str | None = None
    grace = GRACE_S
    i, mode = 0, ""
    while i < len(argv):
        a = argv[i]
        if a == "--fork-nodes":
            mode = "dirs"
        elif a in ("--pids-file", "--grace"):
            if i + 1 >= len(argv):
                raise UsageError(f"{a}: needs a value")
            if a == "--pids-file":
                pids = argv[i + 1]
            else:
                try:
                    grace = float(argv[i + 1])
                except ValueError:
                    raise UsageError(f"--grace: expected seconds, got {argv[i + 1]!r}") from None
                if not 0 < grace <= 600:
                    raise UsageError(f"--grace: expected 0 < seconds <= 600, got {grace:g}")
            i += 1
            mode = ""
        elif a.startswith("--"):
            raise UsageError(f"{a}: unknown option (use --fork-nodes DIR... --pids-file PATH [--grace S])")
        elif mode == "dirs":
            dirs.append(a)
        else:
            raise UsageError(f"{a}: unexpected argument (node directories go after --fork-nodes)")
        i += 1
    if not dirs:
        raise UsageError("--fork-nodes: give at least one node directory (each with its nova.conf)")
    if pids is None:
        raise UsageError("--pids-file: required with --fork-nodes (where the children's pids go)")
    return Args(children=children_of(dirs), pids_file=Path(pids), grace_s=grace)


def children_of(dirs: list[str]) -> tuple[Child, ...]:
    """The node directories, checked: each exists with a nova.conf naming its own host, no
    directory or host twice."""
    out: list[Child] = []
    seen: set[str] = set()
    for d in dirs:
        home = Path(d).resolve()
        conf = home / "nova.conf"
        try:
            text = conf.read_text()
        except OSError as e:
            raise UsageError(f"--fork-nodes: cannot read {conf} ({e.strerror or e}): "
                             "each node directory needs its nova.conf") from None
        host = host_of(text)
        if host is None:
            raise UsageError(f"--fork-nodes: {conf} sets no [DEFAULT] host (each node needs its own)")
        if str(home) in seen or host in {c.host for c in out}:
            raise UsageError(f"--fork-nodes: {home} (host {host}) given twice")
        seen.add(str(home))
        out.append(Child(host=host, home=home))
    return tuple(out)


def prepare() -> None:
    """What nova.cmd.compute does before parsing its config, and every import worth sharing."""
    import importlib

    from nova import monkey_patch

    monkey_patch.patch(backend="threading")
    from juice_nova.driver import register_driver

    register_driver()
    importlib.import_module("nova.cmd.compute")
    for name in HEAVY:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional module of another nova release: the child imports what it needs
            pass
    import nova.objects

    nova.objects.register_all()  # imports only: registers every object class
    try:  # stevedore's in-memory entry point cache, read once here (os_vif's plugins)
        importlib.import_module("stevedore._cache").get_group_all("os_vif")
    except Exception:  # an optimisation only: the child reads it then
        pass


def check_clean() -> None:
    """Nothing but imports exists before the fork (RuntimeError otherwise)."""
    import logging

    extra = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if extra:
        raise RuntimeError(f"threads before the fork: {', '.join(extra)}")
    handlers = [h for lg in [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values()
                                                      if isinstance(x, logging.Logger))]
                for h in lg.handlers if not isinstance(h, logging.NullHandler)]  # libraries' own
    if handlers:
        raise RuntimeError(f"logging handlers before the fork: {handlers[:3]}")
    import nova.conf

    if getattr(nova.conf.CONF, "_args", None) is not None:  # set once oslo.config parsed argv
        raise RuntimeError("oslo.config parsed before the fork")
    sockets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                sockets.append(fd)
        except OSError:  # the directory's own fd, gone by now
            continue
    if sockets:
        raise RuntimeError(f"sockets open before the fork (fds {', '.join(sockets)})")


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)


def run_child(child: Child, parent: int) -> None:
    """In the forked child: never returns."""
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        _die_with_parent(parent)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = os.open(child.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.closerange(3, 65536)  # nothing of the parent's but stdio reaches nova
        os.chdir(child.home)
        sys.argv = ["nova-compute", "--config-file", str(child.config)]
        # the parent's imported objects stay frozen (gc.freeze): collections here never scan,
        # hence never copy, their pages; the child's own objects are collected as usual
        from nova.cmd import compute

        compute.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def write_pids(path: Path, parent: int, pids: dict[str, int]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"parent": parent, "children": pids}, indent=1))
    os.replace(tmp, path)


def read_pids(text: str) -> dict[str, int]:
    """The children's pids ({host: pid}) of a pids file's text ({} when unreadable)."""
    try:
        doc: Any = json.loads(text)
        return {str(h): int(p) for h, p in doc["children"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


class Parent:
    """Forks the children, forwards TERM, reaps them (see the module doc)."""

    def __init__(self, args: Args) -> None:
        self.args = args
        self.pids: dict[int, str] = {}
        self.stopping = False

    def fork_all(self) -> None:
        me = os.getpid()
        gc.freeze()
        for child in self.args.children:
            if self.stopping:  # TERM while forking: no more children
                break
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                run_child(child, me)
            self.pids[pid] = child.host
        write_pids(self.args.pids_file, me, {h: p for p, h in self.pids.items()})
        print(f"juice-nova-compute: {len(self.pids)} node(s) forked: "
              + ", ".join(f"{h}={p}" for p, h in self.pids.items()), file=sys.stderr, flush=True)

    def signal_all(self, sig: int) -> None:
        for pid in list(self.pids):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def _term(self, signum: int, frame: Any) -> None:
        if not self.stopping:
            self.stopping = True
            self.signal_all(signal.SIGTERM)
            signal.setitimer(signal.ITIMER_REAL, self.args.grace_s)

    def _alarm(self, signum: int, frame: Any) -> None:
        print(f"juice-nova-compute: {len(self.pids)} child(ren) still running after "
              f"{self.args.grace_s:g} s: KILL", file=sys.stderr, flush=True)
        self.signal_all(signal.SIGKILL)

    def wait(self) -> int:
        """Reap every child; the exit code of the parent."""
        signal.signal(signal.SIGTERM, self._term)
        signal.signal(signal.SIGINT, self._term)
        signal.signal(signal.SIGALRM, self._alarm)
        failed = False
        while self.pids:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            host = self.pids.pop(pid, None)
            if host is None:
                continue
            if not self.stopping:
                print(f"juice-nova-compute: node {host} (pid {pid}) exited on its own (status "
                      f"{os.waitstatus_to_exitcode(status)}): stopping the others",
                      file=sys.stderr, flush=True)
                failed = True
                self._term(signal.SIGTERM, None)
        signal.setitimer(signal.ITIMER_REAL, 0)
        return 1 if failed else 0


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
    except UsageError as e:
        print(f"juice-nova-compute: {e}", file=sys.stderr)
        return 2
    prepare()
    check_clean()
    parent = Parent(args)
    # TERM before every child is forked: forwarded once they exist (the handler needs the pids)
    signal.signal(signal.SIGTERM, parent._term)
    parent.fork_all()
    return parent.wait()
