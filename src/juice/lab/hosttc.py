"""The WAN on real hosts (issue 15, first part): Juice's own tc commands for one host's WAN
interface, rendered from the delay matrix, and their verification. Pure functions (golden-tested
without root) plus the netem probe.

    rules = rules_for(site=1, matrix=[[0, 50], [50, 0]], subnets={1: "10.0.1.0/24", 2: "10.0.2.0/24"})
    cmds = render(dev="eth1", rules=rules)            # tc qdisc/class/filter, one per line
    problems = verify(rules, json.loads(tc_json))     # `tc -j qdisc show dev eth1`: [] when applied
    cmds_down = teardown("eth1")                      # only this interface's root qdisc

Why not EnOSlib's NetemHTB: on a kernel without netem its deploy reports success while applying
nothing (its commands are joined with ``;``), and its destroy removes every interface's root
qdisc. Here every command is separate (the caller runs them one by one and surfaces the first
failure), teardown touches only the WAN interface, and ``verify`` reads back what the kernel has.

Layout: an HTB root whose default class is unshaped; one HTB class per destination with a delay,
a netem leaf under it (delay, jitter, loss; limit 100,000 packets: netem's default 1,000 drops
at 50 ms), and a u32 filter on the destination subnet. ONE-WAY delays: each host delays what it
sends, so a pair's RTT is the sum of the two directions.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from juice.util.jsontypes import get_in

NETEM_LIMIT = 100_000
UNSHAPED = "10gbit"
FIRST_CLASS = 10


@dataclass(frozen=True)
class Rule:
    """Traffic from this host to ``dst`` (a CIDR) gets ``delay_ms`` (one-way), jitter, loss."""

    dst: str
    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0

    def netem_args(self) -> list[str]:
        out = ["delay", f"{self.delay_ms:g}ms"]
        if self.jitter_ms:
            out.append(f"{self.jitter_ms:g}ms")
        if self.loss_pct:
            out += ["loss", f"{self.loss_pct:g}%"]
        return [*out, "limit", str(NETEM_LIMIT)]


def rules_for(site: int, matrix: Sequence[Sequence[float]], subnets: Mapping[int, str],
              jitter_ms: float = 0.0, loss_pct: float = 0.0) -> list[Rule]:
    """The rules of ``site`` (1-based) from a one-way delay matrix; pairs at 0 ms stay unshaped."""
    row = matrix[site - 1]
    return [Rule(subnets[dst], float(row[dst - 1]), jitter_ms, loss_pct)
            for dst in sorted(subnets) if dst != site and (row[dst - 1] > 0 or loss_pct > 0)]


def render(dev: str, rules: Sequence[Rule]) -> list[str]:
    """The tc commands that install ``rules`` on ``dev`` (idempotent: ``replace``)."""
    if not dev or any(c.isspace() for c in dev):
        raise ValueError(f"dev: not an interface name: {dev!r}")
    cmds = [f"tc qdisc replace dev {dev} root handle 1: htb default 1",
            f"tc class replace dev {dev} parent 1: classid 1:1 htb rate {UNSHAPED}"]
    for i, r in enumerate(rules):
        cid = f"{FIRST_CLASS + i:x}"  # tc reads class and handle minors as hexadecimal
        netem = " ".join(r.netem_args())
        cmds += [f"tc class replace dev {dev} parent 1: classid 1:{cid} htb rate {UNSHAPED}",
                 f"tc qdisc replace dev {dev} parent 1:{cid} handle {cid}: netem {netem}",
                 f"tc filter replace dev {dev} parent 1: protocol ip prio 1 handle 800::{cid} u32 "
                 f"match ip dst {r.dst} flowid 1:{cid}"]
    return cmds


def teardown(dev: str) -> list[str]:
    """Remove what ``render`` installed: this interface's root qdisc, no other interface's."""
    return [f"tc qdisc del dev {dev} root"]


def _ms(value: object) -> float | None:
    """A delay from ``tc -j`` (seconds as a float in iproute2 ≥ 5.x) in milliseconds."""
    if not isinstance(value, int | float | str):
        return None
    try:
        return float(value) * 1000.0
    except ValueError:
        return None


def verify(rules: Sequence[Rule], qdiscs: Sequence[Mapping[str, object]],
           tolerance_ms: float = 0.01) -> list[str]:
    """Problems between ``rules`` and what ``tc -j qdisc show dev DEV`` reports ([] = applied)."""
    netems = {str(q.get("parent", "")): q for q in qdiscs if q.get("kind") == "netem"}
    problems = []
    if not any(q.get("kind") == "htb" and q.get("root") for q in qdiscs):
        problems.append("no htb root qdisc")
    for i, r in enumerate(rules):
        parent = f"1:{FIRST_CLASS + i:x}"
        q = netems.get(parent)
        if q is None:
            problems.append(f"{r.dst}: no netem qdisc under {parent}")
            continue
        got = _ms(get_in(q, "options", "delay", "delay"))
        if got is None or abs(got - r.delay_ms) > tolerance_ms:
            problems.append(f"{r.dst}: netem delay {got} ms, expected {r.delay_ms:g} ms")
    return problems


def netem_available(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
                    ) -> tuple[bool, str]:
    """Whether this kernel has sch_netem: add then delete a netem qdisc on a throwaway network
    namespace's loopback (``juice-netem-probe``, removed after). (ok, the kernel's words)."""
    ns = "juice-netem-probe"
    run(["ip", "netns", "add", ns], capture_output=True, text=True, check=False)
    try:
        cp = run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                  "1ms"], capture_output=True, text=True, check=False)
        why = (cp.stderr or cp.stdout or "").strip().splitlines()
        return cp.returncode == 0, (why[0] if why else "netem qdisc added")
    finally:
        run(["ip", "netns", "del", ns], capture_output=True, text=True, check=False)
