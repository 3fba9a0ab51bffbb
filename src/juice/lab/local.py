"""The local lab: sites as network namespaces on this machine, joined by a core namespace.

Python API used by the CLI, the runner, tests and benchmarks::

    from juice.lab import LocalLab, spec
    with LocalLab.up(spec.parse({"name": "demo", "sites": 3, "delay_ms": 50}),
                     ephemeral=True) as lab:
        lab.run(1, ["ping", "-c", "1", lab.site_ip(2)])
    # leaving the block (or a crash + the next juice command) removes everything

A lab created by ``juice lab up`` is persistent (it stays until ``juice lab down``). An
``ephemeral`` one belongs to the process that made it and is removed when that process
ends, even by kill -9 (the next juice command sweeps it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, TypedDict

from juice.errors import LabError, UserError
from juice.lab import netns, state
from juice.lab import spec as specmod
from juice.lab.place import NetnsPlace
from juice.lab.spec import LabSpec, Link
from juice.lab.state import LabState
from juice.lab.topology import NS_PREFIX, SITE_IFACE, Topology
from juice.lab.wan import Wan, detect_backend
from juice.paths import work_dir
from juice.util import proc
from juice.util.jsontypes import JSONObject

if TYPE_CHECKING:
    from juice.lab.check import CheckReport

Progress = Callable[[str], None]

# Big socket buffers so bulk TCP is not window-limited at 300 ms RTT (64 MiB max).
SITE_SYSCTLS = {
    "net.ipv4.tcp_rmem": "4096 131072 67108864",
    "net.ipv4.tcp_wmem": "4096 65536 67108864",
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv4.ip_local_port_range": "20000 60999",
}
CORE_SYSCTLS = {"net.ipv4.ip_forward": "1", "net.ipv6.conf.all.disable_ipv6": "1"}


# Tests set this to widen the bring-up window so they can kill -9 / Ctrl-C a `lab up` midway.
_SLOW_UP_S = float(os.environ.get("JUICE_TEST_SLOW_UP_S", "0") or 0)


def _quiet(_: str) -> None:
    pass


class LabHealth(TypedDict):
    """``LocalLab.health()``: what exists now versus what the state file says should."""

    name: str
    sites: int
    backend: str
    missing_namespaces: list[str]
    delayer_running: bool
    partitioned: list[int]
    ephemeral: bool
    healthy: bool
    wan_stats: JSONObject | None


class LocalLab:
    """A lab that exists (its state file says so). Create with ``up``, find with ``get``."""

    def __init__(self, st: LabState) -> None:
        self.state = st
        self.spec: LabSpec = specmod.parse(st.spec, f"state of lab {st.name}")
        self.topo = Topology(st.name, st.sites)
        self.links: dict[tuple[int, int], Link] = specmod.links(self.spec)

    # ---- lifecycle -------------------------------------------------------------------
    @classmethod
    def up(cls, lab_spec: LabSpec, *, ephemeral: bool = False, replace: bool = False,
           progress: Progress = _quiet) -> LocalLab:
        """Create the namespaces, links and WAN of ``lab_spec``; record all of it first."""
        topo = Topology(lab_spec.name, lab_spec.sites)
        with state.locked():
            sweep(progress)
            old = state.load(lab_spec.name)
            if old is not None:
                if not replace:
                    raise UserError(f"lab {lab_spec.name!r} is already up: `juice lab down"
                                    f"{'' if lab_spec.name == 'lab' else ' --name ' + lab_spec.name}` "
                                    "first, or pass --replace")
                destroy(old, progress)
            st = LabState(name=lab_spec.name, sites=lab_spec.sites,
                          spec=lab_spec.model_dump(mode="json"), namespaces=topo.namespaces(),
                          workdir=str(work_dir() / lab_spec.name))
            st.claim(ephemeral)
            state.save(st)
        lab = cls(st)
        try:
            lab._build(progress)
        except BaseException:
            progress("bring-up failed: removing what was created")
            with state.locked():
                destroy(st, progress)
            raise
        return lab

    def _build(self, progress: Progress) -> None:
        t0 = time.monotonic()
        topo, st = self.topo, self.state
        wd = Path(st.workdir)
        shutil.rmtree(wd, ignore_errors=True)
        wd.mkdir(parents=True)
        wd.chmod(0o755)
        core = topo.core_ns
        for ns in topo.namespaces():
            if netns.exists(ns):  # left by something that is not in any state file
                netns.delete(ns)
        netns.add(core)
        netns.sysctl(core, CORE_SYSCTLS)
        for site in topo.site_range():
            ns = topo.site_ns(site)
            netns.add(ns)
            netns.sysctl(ns, SITE_SYSCTLS)
            cif = topo.core_iface(site)
            netns.ip(core, "link", "add", cif, "type", "veth", "peer", "name", SITE_IFACE,
                     "netns", ns)
            netns.ip(core, "addr", "add", f"{topo.gateway_ip(site)}/24", "dev", cif)
            netns.ip(core, "link", "set", cif, "up")
            netns.ip(ns, "addr", "add", f"{topo.site_ip(site)}/24", "dev", SITE_IFACE)
            netns.ip(ns, "link", "set", SITE_IFACE, "up")
            netns.ip(ns, "route", "add", "default", "via", topo.gateway_ip(site))
            progress(f"site {site}/{topo.sites} up: {ns} {topo.site_ip(site)}")
            if _SLOW_UP_S:  # fault-injection hook for the crash tests (never set by users)
                time.sleep(_SLOW_UP_S)
        backend = detect_backend(core, self.spec.backend)
        progress(f"WAN backend: {backend}")
        st.backend = backend
        state.save(st)
        pid = self.wan.install(self.links, st.partitioned)
        st.daemon_pid, st.daemon_start = pid, proc.start_time(pid) if pid else None
        st.status = "ready"
        state.save(st)
        progress(f"lab {st.name!r} ready in {time.monotonic() - t0:.1f} s")

    @classmethod
    def get(cls, name: str = "lab") -> LocalLab:
        """The lab called ``name``; UserError when it is not up."""
        with state.locked():
            sweep()
            st = state.load(name)
        if st is None or st.status != "ready":
            raise UserError(f"lab {name!r} is not up: start it with `juice lab up`")
        return cls(st)

    def down(self, progress: Progress = _quiet) -> None:
        with state.locked():
            destroy(self.state, progress)

    def __enter__(self) -> LocalLab:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    # ---- WAN at runtime --------------------------------------------------------------
    @property
    def wan(self) -> Wan:
        return Wan(self.topo, self.state.backend, Path(self.state.workdir))

    @property
    def name(self) -> str:
        return self.topo.name

    @property
    def backend(self) -> str:
        """How the WAN is emulated here: ``netem``, ``userspace`` (the delayer) or ``none``."""
        return self.state.backend

    def check(self, probes: int = 10) -> CheckReport:
        """RTT of every pair of sites against the spec (``juice lab check``)."""
        from juice.lab.check import check

        return check(self, probes=probes)

    def facts(self) -> dict[str, object]:
        """What the manifest records about where the sites are (this machine)."""
        return {"provider": "local", "wan_backend": self.backend}

    def local_namespaces(self) -> dict[str, int]:
        """Namespace name -> site (0 = the core): where this machine sees the lab's processes."""
        return {self.topo.core_ns: 0, **{self.topo.site_ns(s): s for s in self.topo.site_range()}}

    def sampled_hosts(self) -> None:
        """None: this machine sees the sites' processes (``local_namespaces``)."""
        return None

    def set_wan(self, new_spec: LabSpec, progress: Progress = _quiet) -> None:
        """Apply new delays/jitter/loss (same sites) without dropping traffic in flight."""
        if new_spec.sites != self.topo.sites:
            raise UserError(f"sites: the lab has {self.topo.sites} sites; a new WAN spec cannot "
                            f"change that ({new_spec.sites}); `juice lab up --replace` instead")
        new_spec = new_spec.model_copy(update={"name": self.topo.name})
        links = specmod.links(new_spec)
        self.wan.update(links, self.state.partitioned, self.state.daemon_pid)
        with state.locked():
            self.state.spec = new_spec.model_dump(mode="json")
            state.save(self.state)
        self.spec, self.links = new_spec, links

    def partition(self, site: int) -> None:
        """Cut ``site`` off from every other site (both directions) until ``heal``."""
        self.topo.site_ns(site)  # validates the number
        self._set_partitions(sorted(set(self.state.partitioned) | {site}))

    def heal(self, site: int | None = None) -> None:
        """Reconnect ``site`` (or every partitioned site when None)."""
        if site is not None:
            self.topo.site_ns(site)
        keep = [] if site is None else [s for s in self.state.partitioned if s != site]
        self._set_partitions(keep)

    def _set_partitions(self, sites: list[int]) -> None:
        self.wan.update(self.links, sites, self.state.daemon_pid)
        with state.locked():
            self.state.partitioned = sites
            state.save(self.state)

    # ---- running things in sites -----------------------------------------------------
    def site_ip(self, site: int) -> str:
        return self.topo.site_ip(site)

    def site_ns(self, site: int) -> str:
        return self.topo.site_ns(site)

    @property
    def sites(self) -> range:
        return self.topo.site_range()

    @property
    def workdir(self) -> Path:
        return Path(self.state.workdir)

    def place(self, site: int) -> NetnsPlace:
        """Site ``site`` as a place for services (``juice.lab.place``)."""
        return NetnsPlace(site, self.topo.site_ns(site), self.topo.site_ip(site), self.workdir)

    def run(self, site: int, argv: Sequence[str], *, check: bool = True,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run a command inside ``site`` and wait for it."""
        return netns.run_in(self.topo.site_ns(site), argv, check=check, timeout=timeout)

    def popen(self, site: int, argv: Sequence[str], *, stdout: IO[bytes] | int | None = None,
              stderr: IO[bytes] | int | None = None, env: dict[str, str] | None = None,
              cwd: Path | None = None, stdin: IO[bytes] | int | None = None) -> subprocess.Popen[bytes]:
        """Start a process inside ``site``. It dies with the lab (teardown kills every
        process in the site's namespace)."""
        return subprocess.Popen(netns.exec_argv(self.topo.site_ns(site), argv), stdout=stdout,
                                stderr=stderr, stdin=subprocess.DEVNULL if stdin is None else stdin,
                                env=env, cwd=cwd, start_new_session=True)

    def health(self) -> LabHealth:
        """What exists now versus what the state file says should."""
        missing = [ns for ns in self.topo.namespaces() if not netns.exists(ns)]
        daemon_ok = True
        if self.state.backend == "userspace":
            daemon_ok = proc.alive(self.state.daemon_pid, self.state.daemon_start)
        return {"name": self.topo.name, "sites": self.topo.sites, "backend": self.state.backend,
                "missing_namespaces": missing, "delayer_running": daemon_ok,
                "partitioned": self.state.partitioned, "ephemeral": self.state.ephemeral,
                "healthy": not missing and daemon_ok, "wan_stats": self.wan.stats()}


def destroy(st: LabState, progress: Progress = _quiet) -> None:
    """Remove everything ``st`` records (processes, namespaces, work dir), then the state.

    Callers hold ``state.locked()``. Idempotent: a half-built lab is removed the same way.
    """
    st.status = "destroying"
    state.save(st)
    names = st.namespaces or [ns for ns in netns.list_all()
                              if ns.startswith(f"{NS_PREFIX}{st.name}-")]
    if st.daemon_pid and proc.alive(st.daemon_pid, st.daemon_start):
        proc.terminate([st.daemon_pid])
    # Sites first (their servers get a graceful TERM), the core last.
    for ns in sorted(names, key=lambda n: n.endswith("-core")):
        netns.delete(ns)
    if st.workdir:
        shutil.rmtree(st.workdir, ignore_errors=True)
    state.remove(st.name)
    progress(f"lab {st.name!r} removed ({len(names)} namespaces)")


def sweep(progress: Progress = _quiet) -> list[str]:
    """Tear down labs nobody owns any more (crashed bring-ups, dead tests/runs).

    Callers hold ``state.locked()``. Returns the names removed.
    """
    removed = []
    for st in state.all_states():
        if st.stale():
            progress(f"removing leftovers of lab {st.name!r} (owner gone, status {st.status})")
            destroy(st, progress)
            removed.append(st.name)
    return removed


def down_all(progress: Progress = _quiet) -> list[str]:
    """Remove every lab with a state file AND every ``juice-`` namespace, known or not."""
    with state.locked():
        names = []
        for st in state.all_states():
            destroy(st, progress)
            names.append(st.name)
        for ns in netns.list_all():
            if ns.startswith(NS_PREFIX):
                netns.delete(ns)
                names.append(ns)
    if not names:
        progress("nothing to remove")
    return names


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError("the lab needs root (network namespaces): rerun as root or with sudo")
    if shutil.which("ip") is None or shutil.which("iptables-restore") is None:
        raise LabError("iproute2/iptables are missing: run scripts/setup.sh")


def uniform_lab(prefix: str, sites: int, delay_ms: float, progress: Progress = _quiet) -> LocalLab:
    """An ephemeral lab ``<prefix><pid>`` of ``sites`` sites, ``delay_ms`` one-way between every
    pair (what a study's ``lab()`` usually opens: ``with uniform_lab(...) as lab``)."""
    import os

    from juice.lab import spec as labspec

    ls = labspec.parse({"name": f"{prefix}{os.getpid() % 100000}", "sites": sites, "delay_ms": delay_ms})
    progress(f"lab: {sites} sites at {delay_ms:g} ms one-way")
    return LocalLab.up(ls, ephemeral=True, progress=progress)
