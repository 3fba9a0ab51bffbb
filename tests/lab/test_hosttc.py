"""tc commands for a real host's WAN interface (issue 15): golden strings, the read-back check,
and the netem probe on this kernel (which has no netem: the probe must say so, not pretend)."""

from __future__ import annotations

from juice.lab import hosttc, netns
from juice.lab.hosttc import Rule
from tests.services.conftest import needs_lab

SUBNETS = {1: "10.0.1.0/24", 2: "10.0.2.0/24", 3: "10.0.3.0/24"}


def test_rules_come_from_the_row_of_the_one_way_matrix() -> None:
    m = [[0, 50, 0], [50, 0, 10], [0, 10, 0]]
    assert hosttc.rules_for(1, m, SUBNETS) == [Rule("10.0.2.0/24", 50.0)]
    assert hosttc.rules_for(2, m, SUBNETS, jitter_ms=1, loss_pct=0.5) == [
        Rule("10.0.1.0/24", 50.0, 1.0, 0.5), Rule("10.0.3.0/24", 10.0, 1.0, 0.5)]


def test_golden_commands_one_per_line_and_a_teardown_of_this_interface_only() -> None:
    cmds = hosttc.render("eth1", [Rule("10.0.2.0/24", 50), Rule("10.0.3.0/24", 12.5, 2, 1)])
    assert cmds == [
        "tc qdisc replace dev eth1 root handle 1: htb default 1",
        "tc class replace dev eth1 parent 1: classid 1:1 htb rate 10gbit",
        "tc class replace dev eth1 parent 1: classid 1:a htb rate 10gbit",
        "tc qdisc replace dev eth1 parent 1:a handle a: netem delay 50ms limit 100000",
        "tc filter replace dev eth1 parent 1: protocol ip prio 1 handle 800::a u32 match ip dst 10.0.2.0/24 "
        "flowid 1:a",
        "tc class replace dev eth1 parent 1: classid 1:b htb rate 10gbit",
        "tc qdisc replace dev eth1 parent 1:b handle b: netem delay 12.5ms 2ms loss 1% limit 100000",
        "tc filter replace dev eth1 parent 1: protocol ip prio 1 handle 800::b u32 match ip dst 10.0.3.0/24 "
        "flowid 1:b",
    ]
    assert hosttc.teardown("eth1") == ["tc qdisc del dev eth1 root"]


def test_verify_reads_back_what_the_kernel_reports() -> None:
    rules = [Rule("10.0.2.0/24", 50), Rule("10.0.3.0/24", 10)]
    shown = [{"kind": "htb", "handle": "1:", "root": True},
             {"kind": "netem", "handle": "a:", "parent": "1:a", "options": {"delay": {"delay": 0.05}}},
             {"kind": "netem", "handle": "b:", "parent": "1:b", "options": {"delay": {"delay": 0.02}}}]
    assert hosttc.verify(rules, shown) == ["10.0.3.0/24: netem delay 20.0 ms, expected 10 ms"]
    assert hosttc.verify(rules, shown[:1]) == ["10.0.2.0/24: no netem qdisc under 1:a",
                                               "10.0.3.0/24: no netem qdisc under 1:b"]
    assert hosttc.verify([], []) == ["no htb root qdisc"]


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_the_netem_probe_answers_and_leaves_no_namespace() -> None:
    ok, why = hosttc.netem_available()
    assert isinstance(ok, bool) and why
    if not ok:  # this machine kind: the kernel has no sch_netem, and says so
        assert "unknown" in why.lower() or "not supported" in why.lower() or "no such file" in why.lower()
    assert "juice-netem-probe" not in netns.list_all()
