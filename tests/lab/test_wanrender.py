from __future__ import annotations

from juice.lab import spec, wanrender
from juice.lab.topology import Topology


def _lab(data: dict[str, object]) -> tuple[Topology, dict[tuple[int, int], spec.Link]]:
    s = spec.parse(data)
    return Topology(s.name, s.sites), spec.links(s)


def test_pair_queues_are_distinct_and_stable() -> None:
    topo = Topology("x", 9)
    queues = {wanrender.queue_of(topo, s, d) for s in range(1, 10) for d in range(1, 10) if s != d}
    assert queues == set(range(72))


def test_many_sites_fall_back_to_one_queue_per_destination() -> None:
    topo = Topology("x", 45)
    assert wanrender.queue_of(topo, 3, 7) == 6
    assert wanrender.queue_of(topo, 9, 7) == 6


def test_userspace_rules_queue_only_emulated_pairs() -> None:
    topo, links = _lab({"sites": 3, "delay_ms": 50, "pairs": [{"a": 1, "b": 2, "delay_ms": 0}]})
    doc = wanrender.iptables_chains(topo, links, [], userspace=True)
    rules = [line for line in doc.splitlines() if "NFQUEUE" in line]
    assert len(rules) == 4  # 6 ordered pairs minus the two LAN directions 1<->2
    assert "-s 10.210.1.0/24 -d 10.210.3.0/24 -j NFQUEUE --queue-num 1" in doc
    assert doc.startswith("*filter\n:JUICE-PART - [0:0]\n:JUICE-WAN - [0:0]\n")
    assert doc.endswith("COMMIT\n")


def test_partition_drops_both_directions_before_any_delay() -> None:
    topo, links = _lab({"sites": 3, "delay_ms": 5})
    doc = wanrender.iptables_chains(topo, links, [2], userspace=False)
    assert "-A JUICE-PART -s 10.210.2.0/24 -j DROP" in doc
    assert "-A JUICE-PART -d 10.210.2.0/24 -j DROP" in doc
    assert "NFQUEUE" not in doc


def test_delayer_table_is_in_microseconds_and_loss_is_a_fraction() -> None:
    topo, links = _lab({"sites": 2, "delay_ms": 12.5, "jitter_ms": 1, "loss_pct": 5})
    table = wanrender.delayer_table(topo, links, offset_us=200)
    assert table["offset_us"] == 200 and table["site_octet"] == 2
    assert table["pairs"] == [
        {"src": 1, "dst": 2, "queue": 0, "delay_us": 12500, "jitter_us": 1000, "loss": 0.05},
        {"src": 2, "dst": 1, "queue": 1, "delay_us": 12500, "jitter_us": 1000, "loss": 0.05}]


def test_netem_gives_each_source_its_own_leaf_on_the_destination_link() -> None:
    topo, links = _lab({"sites": 3, "matrix": [[0, 10, 20], [10, 0, 30], [20, 30, 0]],
                        "loss_pct": 1})
    cmds = [" ".join(c) for c in wanrender.netem_setup(topo, links)]
    assert "tc qdisc replace dev s3 parent 1:12 handle 12: netem delay 30ms loss 1% limit 100000" in cmds
    assert any("dev s3" in c and "match ip src 10.210.2.0/24 flowid 1:12" in c for c in cmds)
    updates = [" ".join(c) for c in wanrender.netem_update(topo, links)]
    assert len(updates) == 6 and all(" change " in u for u in updates)
