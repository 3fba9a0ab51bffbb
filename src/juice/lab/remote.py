"""The lab on SSH hosts: site k = the k-th host, the WAN shaped on the hosts themselves.

    with RemoteLab.up(lab_spec, hosts, progress=print) as lab:   # hosts: provider.site_hosts(...)
        lab.hosts[1].run([["mariadbd", "--version"]])
        lab.check()                                              # RTT of every pair, as `juice lab check`

Bring-up, in phases across all hosts at once (one request per host each): connect (ssh +
the host agent), find each host's WAN interface (the route to the other hosts' WAN
addresses), probe netem in a throwaway network namespace (``unshare -n``), shape, verify,
measure. The WAN, per host, on what it SENDS (one-way delays; a pair's RTT is the sum):

- netem present: Juice's own HTB + netem + u32 per destination (``juice.lab.hosttc``),
  applied one command at a time (the first failure surfaces), then read back with
  ``tc -j qdisc show`` and compared;
- netem missing (``provider.netem: auto``): the userspace delayer ``juice-wan-delay``
  (shipped to the host when it lacks it) behind an NFQUEUE rule per destination in a
  ``JUICE-HWAN`` chain of the mangle table's OUTPUT; ``provider.netem: require`` refuses.

Teardown: each agent removes its rules (the WAN interface's root qdisc only, the JUICE-HWAN
chain), stops what it started (by recorded pid) and removes ``/var/tmp/juice-host/<lab>``.
The agents do that by themselves when Juice dies, and the next agent sweeps after one that
was killed.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypedDict

from juice.errors import LabError
from juice.hosts.agent import BASE
from juice.hosts.session import Hosts, Proc, Session
from juice.lab import hosttc
from juice.lab.check import CheckReport, PairResult, judge, with_second_round
from juice.lab.hostplace import HostPlace
from juice.lab.place import SampledHost
from juice.lab.provider import StaticHost
from juice.lab.spec import LabSpec, Link, expected_rtt_ms, links
from juice.paths import native_bin, private_tmp, work_dir

Progress = Callable[[str], None]
HWAN_CHAIN = "JUICE-HWAN"
PART_CHAIN = "JUICE-PART"  # partitions: DROP to/from the cut sites' WAN addresses
QUEUE_BASE = 4200
NETEM_PROBE = ["unshare", "-n", "sh", "-c", "tc qdisc add dev lo root netem delay 1ms"]


class DelayerTable(TypedDict):
    """``wan/table.json``: what the delayer of one host holds back, per destination."""

    version: int
    site_octet: int
    offset_us: int
    pairs: list[dict[str, int | float]]


class WanFacts(TypedDict, total=False):
    """The WAN Juice applied on one host (the manifest's ``lab.wan.<site>``, ``pid_ref`` left out)."""

    dev: str
    backend: str
    rules: int
    pairs: int
    delayer_shipped: bool
    pid: int
    pid_ref: Proc


def _quiet(_: str) -> None:
    pass


def delayer_octet(addresses: Sequence[str]) -> int:
    """The octet (0-3) that tells every host's WAN address apart (the delayer keys pairs by
    it); LabError when none does."""
    octs = [ipaddress.IPv4Address(a).packed for a in addresses]
    for i in (3, 2, 1, 0):
        if len({o[i] for o in octs}) == len(octs):
            return i
    raise LabError(
        "the userspace delayer needs one octet of the hosts' WAN addresses that differs "
        "between every pair of hosts; none does (set provider.netem: require on netem hosts)"
    )


def delayer_plan(
    site: int, addresses: dict[int, str], spec_links: dict[tuple[int, int], Link], offset_us: int
) -> tuple[DelayerTable, list[list[str]], list[list[str]]]:
    """The delayer table of ``site`` and its iptables commands (install, undo)."""
    octet = delayer_octet([addresses[s] for s in sorted(addresses)])
    key = {s: ipaddress.IPv4Address(a).packed[octet] for s, a in addresses.items()}
    pairs: list[dict[str, int | float]] = []
    rules: list[list[str]] = []
    for dst in sorted(addresses):
        link = spec_links.get((site, dst))
        if dst == site or link is None or not link.emulated:
            continue
        q = QUEUE_BASE + dst
        pairs.append(
            {
                "src": key[site],
                "dst": key[dst],
                "queue": q,
                "delay_us": round(link.delay_ms * 1000),
                "jitter_us": round(link.jitter_ms * 1000),
                "loss": link.loss_pct / 100.0,
            }
        )
        rules.append(
            [
                "iptables",
                "-w",
                "-t",
                "mangle",
                "-A",
                HWAN_CHAIN,
                "-s",
                addresses[site],
                "-d",
                f"{addresses[dst]}/32",
                "-j",
                "NFQUEUE",
                "--queue-num",
                str(q),
                "--queue-bypass",
            ]
        )
    table: DelayerTable = {"version": 1, "site_octet": octet, "offset_us": offset_us, "pairs": pairs}
    install = [
        ["iptables", "-w", "-t", "mangle", "-N", HWAN_CHAIN],
        *rules,
        ["iptables", "-w", "-t", "mangle", "-I", "OUTPUT", "-j", HWAN_CHAIN],
    ]
    undo = [
        ["iptables", "-w", "-t", "mangle", "-X", HWAN_CHAIN],
        ["iptables", "-w", "-t", "mangle", "-F", HWAN_CHAIN],
        ["iptables", "-w", "-t", "mangle", "-D", "OUTPUT", "-j", HWAN_CHAIN],
    ]  # run last first
    return table, install, undo


class RemoteLab:
    """Sites on SSH hosts (``Sites`` for what runs there through ``hosts``)."""

    def __init__(self, spec: LabSpec, site_hosts: Sequence[StaticHost], hosts: Hosts, tmp: Path) -> None:
        self.spec = spec
        self.site_hosts = list(site_hosts)
        self.hosts = hosts
        self.tmp = tmp
        self.links = links(spec)
        self.backend = "none"
        self.wan_if: dict[int, str] = {}
        self.wan_facts: dict[int, WanFacts] = {}
        self.listen_ports: dict[int, int] = {}
        self.netem = "auto"
        self.partitioned: set[int] = set()
        self._part_chain: set[int] = set()  # hosts whose partition chain is in place
        self._workdir = work_dir() / spec.name
        self._workdir.mkdir(parents=True, exist_ok=True)

    # ---- Sites ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def sites(self) -> range:
        return range(1, len(self.site_hosts) + 1)

    @property
    def workdir(self) -> Path:
        """Where Juice keeps this lab's files on THIS machine (job files, fetched logs)."""
        return self._workdir

    @property
    def root(self) -> str:
        """The lab's directory on every host (everything Juice puts there)."""
        return f"{BASE}/{self.name}"

    def site_ip(self, site: int) -> str:
        h = self.site_hosts[site - 1]
        return str(h.wan_address or h.address)

    def place(self, site: int) -> HostPlace:
        """Site ``site`` (its host) as a place for services (``juice.lab.place``)."""
        return HostPlace(self.hosts[site], Path(self.root), self.site_ip(site))

    def __getitem__(self, site: int) -> Session:
        return self.hosts[site]

    # ---- load drivers (juice.load.drivers uses these when present) -------------------------------
    def remote_path(self, site: int, local: Path) -> str:
        """Where a file of this lab's local workdir lives on the host of ``site``."""
        return f"{self.root}/run/{local.name}"

    def ship_file(self, site: int, local: Path) -> str:
        self.hosts[site].put(f"run/{local.name}", local.read_bytes(), mode=0o600)
        return self.remote_path(site, local)

    def fetch_file(self, site: int, remote: str, local: Path) -> None:
        data = self.hosts[site].get(remote.removeprefix(self.root + "/"))
        if data is not None:
            local.write_bytes(data)

    def popen(
        self,
        site: int,
        argv: Sequence[str],
        *,
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: IO[bytes] | int | None = None,
    ) -> subprocess.Popen[bytes]:
        """``argv`` on the host of ``site`` through its own ssh connection, its output streamed
        back (a load driver's progress lines). ``-tt``: when this ssh ends (the driver is
        stopped here), the remote process gets SIGHUP. With ``stdin`` (a pipe to talk to the
        process, e.g. a worker reading commands), ``-T`` instead: no terminal that would echo
        the input; the process sees EOF when this ssh ends. Only PYTHONPATH and
        PYTHONUNBUFFERED of ``env`` travel: the host has its own environment."""
        keep = {k: v for k, v in (env or {}).items() if k in ("PYTHONPATH",)}
        remote_env = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**keep, "PYTHONUNBUFFERED": "1"}.items())
        command = f"cd {shlex.quote(self.root)} && exec env {remote_env} {shlex.join(argv)}"
        sess = self.hosts[site]
        return subprocess.Popen(
            [*sess.argv(command)[:1], "-tt" if stdin is None else "-T", *sess.argv(command)[1:]],
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )

    # ---- WAN changes -----------------------------------------------------------------------------
    def set_wan(self, spec: LabSpec, progress: Progress = _quiet) -> None:
        """Another WAN on the same hosts: the current rules undone (and the delayer stopped),
        the new ones applied and verified."""

        def clear(site: int, s: Session) -> None:
            s.call("run_undo", timeout=120)
            pid = self.wan_facts.get(site, WanFacts()).get("pid_ref")
            if pid is not None:
                s.kill([pid], grace_s=5)

        self.hosts.each("WAN: clear", clear)
        self._part_chain.clear()  # the undo commands removed the partition chains too
        self.spec = spec
        self.links = links(spec)
        self.wan_facts = {}
        self._apply_wan(self.netem, progress)
        if self.partitioned:  # a cut in effect stays in effect under the new WAN
            self._apply_partitions()

    # ---- partitions ------------------------------------------------------------------------------
    def partition(self, site: int) -> None:
        """Cut ``site`` off from every other site (both directions) until ``heal``: every host
        drops what it exchanges with the cut hosts' WAN addresses (the control network, ssh to
        the agents, is not touched)."""
        if site not in self.sites:
            raise LabError(f"site: {site} is not a site of this lab (1..{len(self.sites)})")
        self.partitioned.add(site)
        self._apply_partitions()

    def heal(self, site: int | None = None) -> None:
        """Reconnect ``site`` (or every partitioned site when None)."""
        if site is None:
            self.partitioned.clear()
        else:
            self.partitioned.discard(site)
        self._apply_partitions()

    def _apply_partitions(self) -> None:
        def one(k: int, s: Session) -> None:
            if k not in self._part_chain:
                s.run([["iptables", "-w", "-N", PART_CHAIN]], keep_going=True)  # kept from a crash: fine
                for argv in (["iptables", "-w", "-X", PART_CHAIN], ["iptables", "-w", "-F", PART_CHAIN],
                             ["iptables", "-w", "-D", "OUTPUT", "-j", PART_CHAIN],
                             ["iptables", "-w", "-D", "INPUT", "-j", PART_CHAIN]):
                    s.call("undo", argv=argv)  # run last first when the lab ends
                s.run([["iptables", "-w", "-I", "INPUT", "-j", PART_CHAIN],
                       ["iptables", "-w", "-I", "OUTPUT", "-j", PART_CHAIN]], what="partition chain")
                self._part_chain.add(k)
            cut = [o for o in self.sites if o != k and (k in self.partitioned or o in self.partitioned)]
            rules = [["iptables", "-w", "-A", PART_CHAIN, flag, f"{self.site_ip(o)}/32", "-j", "DROP"]
                     for o in cut for flag in ("-s", "-d")]
            s.run([["iptables", "-w", "-F", PART_CHAIN], *rules], what="partition rules")

        self.hosts.each("partition", one)

    # ---- up / down -----------------------------------------------------------------------------
    @classmethod
    @contextmanager
    def up(
        cls, spec: LabSpec, site_hosts: Sequence[StaticHost], *, netem: str = "auto",
        progress: Progress = _quiet
    ) -> Iterator[RemoteLab]:
        if len(site_hosts) != spec.sites:
            raise LabError(f"{spec.sites} sites but {len(site_hosts)} host(s): one host per site")
        tmp = private_tmp("remote")
        hosts = Hosts(spec.name, {k + 1: h for k, h in enumerate(site_hosts)}, tmp)
        lab = cls(spec, site_hosts, hosts, tmp)
        try:
            hosts.open(progress)
            lab.netem = netem
            lab._find_wan_interfaces()
            lab._apply_wan(netem, progress)
            yield lab
        finally:
            progress(
                f"lab {spec.name}: stopping what runs on {len(site_hosts)} host(s), removing the WAN rules "
                f"and {BASE}/{spec.name}"
            )
            hosts.close()
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(lab._workdir, ignore_errors=True)

    def _find_wan_interfaces(self) -> None:
        def one(site: int, s: Session) -> str:
            other = next((self.site_ip(k) for k in self.sites if k != site), self.site_ip(site))
            res = s.run([["ip", "-j", "route", "get", other]], what="route to the other hosts")
            route = json.loads(res[0]["out"])[0]
            if route.get("dev") == "lo" and len(self.sites) > 1:
                raise LabError(f"{s.name}: the WAN address {other} of another host is local to this one")
            listen = s.call("listen", host=self.site_ip(site))
            self.listen_ports[site] = int(listen["port"])
            return str(route["dev"])

        self.wan_if = self.hosts.each("WAN interfaces", one)

    def _apply_wan(self, netem: str, progress: Progress) -> None:
        shaped = any(link.emulated for link in self.links.values())
        if not shaped:
            self.backend = "none"
            progress("WAN: every pair at 0 ms: nothing shaped on the hosts")
            return
        probes = self.hosts.each("netem probe", lambda _s, s: s.run([NETEM_PROBE], keep_going=True)[0])
        missing = {k: (r["err"] or r["out"]).strip() for k, r in probes.items() if r["rc"] != 0}
        if missing and netem == "require":
            k, why = next(iter(missing.items()))
            raise LabError(
                f"provider.netem: require, but host of site {k} has no netem ({why}); "
                "use netem: auto for the userspace delayer"
            )
        use_netem = not missing and netem != "userspace"
        if not use_netem and netem == "auto":
            k, why = next(iter(missing.items()))
            progress(
                f"WAN: no netem on site {k}'s host ({why}): the userspace delayer "
                "(juice-wan-delay, NFQUEUE) shapes on every host instead"
            )
        self.backend = "netem" if use_netem else "userspace"
        t0 = time.monotonic()
        self.wan_facts = self.hosts.each("WAN", self._netem_host if use_netem else self._delayer_host)
        progress(
            f"WAN ({self.backend}) applied and verified on {len(self.sites)} host(s) in "
            f"{time.monotonic() - t0:.1f} s"
        )

    def _matrix(self) -> list[list[float]]:
        n = len(self.sites)
        return [
            [0.0 if a == b else self.links[(a, b)].delay_ms for b in range(1, n + 1)] for a in range(1, n + 1)
        ]

    def _netem_host(self, site: int, s: Session) -> WanFacts:
        dev = self.wan_if[site]
        subnets = {k: f"{self.site_ip(k)}/32" for k in self.sites}
        rules = hosttc.rules_for(site, self._matrix(), subnets, self.spec.jitter_ms, self.spec.loss_pct)
        for argv in reversed([shlex.split(c) for c in hosttc.teardown(dev)]):
            s.call("undo", argv=argv)
        s.run([shlex.split(c) for c in hosttc.render(dev, rules)], what=f"tc on {dev}")
        shown = s.run([["tc", "-j", "qdisc", "show", "dev", dev]], what="tc read-back")[0]["out"]
        problems = hosttc.verify(rules, json.loads(shown or "[]"))
        if problems:
            raise LabError(f"{s.name}: the WAN on {dev} is not what Juice applied: {'; '.join(problems)}")
        return {"dev": dev, "backend": "netem", "rules": len(rules)}

    def _delayer_host(self, site: int, s: Session) -> WanFacts:
        from juice.lab.wan import DELAYER, offset_us

        addresses = {k: self.site_ip(k) for k in self.sites}
        table, install, undo = delayer_plan(site, addresses, self.links, offset_us())
        local = native_bin(DELAYER)
        if not local.exists():
            raise LabError(f"{DELAYER} is not built on this machine ({local}): run scripts/setup.sh")
        binary, shipped = str(local), False
        if s.run([["test", "-x", binary]], keep_going=True)[0]["rc"] != 0:
            s.put(f"bin/{DELAYER}", local.read_bytes(), mode=0o755)  # a static Go binary
            binary, shipped = f"{self.root}/bin/{DELAYER}", True
        s.put("wan/table.json", json.dumps(table))
        for argv in undo:
            s.call("undo", argv=argv)
        proc = s.spawn(
            [
                binary,
                "--table",
                f"{self.root}/wan/table.json",
                "--pidfile",
                f"{self.root}/wan/delay.pid",
                "--stats",
                f"{self.root}/wan/stats.json",
            ],
            log="wan/delay.log",
        )
        deadline = time.monotonic() + 10
        while s.get("wan/delay.pid") is None:
            if time.monotonic() > deadline or not s.alive(proc):
                log = (s.get("wan/delay.log") or b"").decode(errors="replace").strip().splitlines()
                raise LabError(f"{s.name}: {DELAYER} did not start: {log[-1] if log else 'no output'}")
            time.sleep(0.1)
        s.run(install, what="the delayer's iptables rules")
        return {
            "dev": self.wan_if[site],
            "backend": "userspace",
            "pairs": len(table["pairs"]),
            "delayer_shipped": shipped,
            "pid": proc.pid,
            "pid_ref": proc,
        }

    # ---- check ---------------------------------------------------------------------------------
    def check(self, probes: int = 10, tol_ms: float = 1.0, tol_pct: float = 5.0) -> CheckReport:
        """TCP connect times (one RTT each) from every host to every other host's WAN address,
        judged as ``juice lab check`` judges ping RTTs."""
        started, t0 = time.time(), time.monotonic()

        def probe(pairs: list[tuple[int, int]]) -> list[PairResult]:
            def one(a: int, s: Session) -> list[tuple[int, list[float] | None]]:
                out: list[tuple[int, list[float] | None]] = []
                for a2, b in pairs:
                    if a2 == a:
                        exp = expected_rtt_ms(self.links, a, b)
                        timeout = max(2.0, exp / 250)
                        out.append((b, s.tcp_ms(self.site_ip(b), self.listen_ports[b], n=probes,
                                                timeout=timeout)))
                return out

            got = self.hosts.each("RTT check", one, sites=sorted({a for a, _ in pairs}))
            return [judge(a, b, expected_rtt_ms(self.links, a, b), ms or [], probes, tol_ms, tol_pct)
                    for a, rows in got.items() for b, ms in rows]

        # hosts are shared machines: one busy moment can move a pair's median
        pairs = with_second_round([(a, b) for a in self.sites for b in self.sites if a < b], probe)
        return CheckReport(self.name, self.backend, probes, pairs, started, round(time.monotonic() - t0, 2))

    def local_namespaces(self) -> None:
        """None: the hosts' processes are not visible from this machine."""
        return None

    def sampled_hosts(self) -> list[SampledHost]:
        """Every host, reached by ssh as the agents are (its processes: what its agent started)."""
        out = []
        for k in self.sites:
            s = self.hosts[k]
            out.append(SampledHost(site=k, name=f"{s.host.user}@{s.host.address}:{s.host.port}",
                                   argv=s.argv, python=str(s.host.python), root=self.root,
                                   wan_if=self.wan_if.get(k)))
        return out

    def facts(self) -> dict[str, object]:
        """What the manifest records about the hosts and the WAN on them."""
        return {
            "provider": "enoslib-static",
            "hosts": self.hosts.facts(),
            "root": self.root,
            "wan_backend": self.backend,
            "wan": {
                str(k): {x: y for x, y in v.items() if x != "pid_ref"} for k, v in self.wan_facts.items()
            },
            "wan_interfaces": {str(k): v for k, v in self.wan_if.items()},
        }


