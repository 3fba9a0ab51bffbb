from __future__ import annotations

from juice.lab import check

PING = """PING 10.210.2.2 (10.210.2.2) 56(84) bytes of data.
64 bytes from 10.210.2.2: icmp_seq=1 ttl=63 time=100.4 ms
64 bytes from 10.210.2.2: icmp_seq=2 ttl=63 time=100.2 ms
64 bytes from 10.210.2.2: icmp_seq=3 ttl=63 time=103 ms

--- 10.210.2.2 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 2003ms
"""


def test_parse_ping_reads_every_reply() -> None:
    assert check.parse_ping(PING) == [100.4, 100.2, 103.0]


def test_tolerance_is_the_larger_of_absolute_and_relative() -> None:
    assert check.tolerance(10, 0.5, 2) == 0.5
    assert check.tolerance(300, 0.5, 2) == 6


def test_judge_uses_the_median_against_the_expected_rtt() -> None:
    r = check.judge(1, 2, 100, [100.4, 100.2, 103.0], 3, 0.5, 2)
    assert r.median_rtt_ms == 100.4 and r.ok and r.tolerance_ms == 2
    bad = check.judge(1, 2, 10, [11.0, 11.2, 10.9], 3, 0.5, 2)
    assert not bad.ok


def test_no_reply_fails() -> None:
    r = check.judge(1, 2, 0, [], 5, 0.5, 2)
    assert not r.ok and r.received == 0 and r.median_rtt_ms is None
