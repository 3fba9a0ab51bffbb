"""Pure renderers for the WAN: iptables rules, tc netem commands, the delayer's table.

Nothing here touches the system, so every rule the lab installs can be unit-tested
without root (in the spirit of enoslib's ``htb.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from juice.lab.spec import Link
from juice.lab.topology import SITE_OCTET, Topology

PART_CHAIN = "JUICE-PART"
WAN_CHAIN = "JUICE-WAN"
MAX_PAIR_QUEUES = 1024
NETEM_LIMIT = 100_000  # packets a netem leaf may hold (its default of 1000 drops at 50 ms)


def queue_of(topo: Topology, src: int, dst: int) -> int:
    """NFQUEUE number of the src->dst pair: one queue per ordered pair while that stays
    small (FIFO per queue lets the delayer batch verdicts), else one queue per destination."""
    n = topo.sites
    if n * (n - 1) <= MAX_PAIR_QUEUES:
        return (src - 1) * (n - 1) + (dst - 1 - (1 if dst > src else 0))
    return dst - 1


def iptables_chains(topo: Topology, links: dict[tuple[int, int], Link],
                    partitioned: Iterable[int], *, userspace: bool) -> str:
    """An ``iptables-restore --noflush`` document that atomically refills both Juice chains.

    Partitioned sites are cut both ways (DROP before any delay). With the userspace
    backend, each emulated pair is sent to its NFQUEUE; LAN pairs are never queued.
    """
    lines = ["*filter", f":{PART_CHAIN} - [0:0]", f":{WAN_CHAIN} - [0:0]"]
    for site in sorted(set(partitioned)):
        lines.append(f"-A {PART_CHAIN} -s {topo.subnet(site)} -j DROP")
        lines.append(f"-A {PART_CHAIN} -d {topo.subnet(site)} -j DROP")
    if userspace:
        for (src, dst), link in sorted(links.items()):
            if link.emulated:
                lines.append(f"-A {WAN_CHAIN} -s {topo.subnet(src)} -d {topo.subnet(dst)} "
                             f"-j NFQUEUE --queue-num {queue_of(topo, src, dst)}")
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def iptables_hooks() -> list[list[str]]:
    """Jumps from FORWARD into the Juice chains (installed once, after the chains exist)."""
    return [["iptables", "-A", "FORWARD", "-j", PART_CHAIN],
            ["iptables", "-A", "FORWARD", "-j", WAN_CHAIN]]


def delayer_table(topo: Topology, links: dict[tuple[int, int], Link], offset_us: int) -> dict[str, object]:
    """The JSON table ``juice-wan-delay`` reads (see native/README.md for the contract)."""
    pairs = [
        {"src": s, "dst": d, "queue": queue_of(topo, s, d),
         "delay_us": round(link.delay_ms * 1000), "jitter_us": round(link.jitter_ms * 1000),
         "loss": link.loss_pct / 100.0}
        for (s, d), link in sorted(links.items()) if link.emulated
    ]
    return {"version": 1, "site_octet": SITE_OCTET, "offset_us": offset_us, "pairs": pairs}


def _netem_args(link: Link | None) -> list[str]:
    if link is None or not link.emulated:
        return ["netem", "delay", "0ms", "limit", str(NETEM_LIMIT)]
    args = ["netem", "delay", f"{link.delay_ms:g}ms"]
    if link.jitter_ms > 0:
        args += [f"{link.jitter_ms:g}ms", "distribution", "normal"]
    if link.loss_pct > 0:
        args += ["loss", f"{link.loss_pct:g}%"]
    return [*args, "limit", str(NETEM_LIMIT)]


def netem_setup(topo: Topology, links: dict[tuple[int, int], Link]) -> list[list[str]]:
    """tc commands (to run in the core namespace) giving each src->dst pair its own netem.

    On the core's veth towards each destination: an htb root, one class per source site
    (classid 1:<10+src>, matched on the source subnet) holding a netem leaf. Unmatched
    traffic goes to 1:1, undelayed.
    """
    cmds: list[list[str]] = []
    for dst in topo.site_range():
        dev = topo.core_iface(dst)
        cmds.append(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb",
                     "default", "1"])
        cmds.append(["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1",
                     "htb", "rate", "100gbit"])
        for src in topo.site_range():
            if src == dst:
                continue
            cid = 10 + src
            cmds.append(["tc", "class", "replace", "dev", dev, "parent", "1:", "classid",
                         f"1:{cid}", "htb", "rate", "100gbit"])
            cmds.append(["tc", "qdisc", "replace", "dev", dev, "parent", f"1:{cid}", "handle",
                         f"{cid}:", *_netem_args(links.get((src, dst)))])
            cmds.append(["tc", "filter", "replace", "dev", dev, "parent", "1:", "protocol", "ip",
                         "prio", "1", "handle", f"800::{cid:x}", "u32", "match", "ip", "src",
                         topo.subnet(src), "flowid", f"1:{cid}"])
    return cmds


def netem_update(topo: Topology, links: dict[tuple[int, int], Link]) -> list[list[str]]:
    """tc commands that change every netem leaf in place (no packet in flight is dropped)."""
    cmds: list[list[str]] = []
    for dst in topo.site_range():
        for src in topo.site_range():
            if src != dst:
                cid = 10 + src
                cmds.append(["tc", "qdisc", "change", "dev", topo.core_iface(dst), "parent",
                             f"1:{cid}", "handle", f"{cid}:", *_netem_args(links.get((src, dst)))])
    return cmds
