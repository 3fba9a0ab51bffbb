"""The trace's vif_plugged phase (issue 40): the simulated spawn's wait for neutron's
``network-vif-plugged`` (logged by juice_nova.virt with its seconds) is a phase of its own inside
the spawn; boots without the real neutron keep their phases; a missed event is named."""

from __future__ import annotations

import pytest

from juice.trace import flow
from juice.trace.causes import cause_of
from juice.trace.osprofiler import _covered
from juice.trace.parse import parse_lines, stream_component

UUID = "0b7f3c52-1111-4222-8333-944445555666"
PORT = "5204cb4d-8f22-41c2-80c5-10e0d7881abd"
CTX = "[req-aaaaaaaa-1111-4222-8333-944445555666 req-bbbbbbbb-1111-4222-8333-944445555666 admin admin - - -]"


def test_the_spawns_wait_line_becomes_a_vif_plugged_event() -> None:
    lines = [f"2026-11-27 17:00:04.000 7 INFO juice_nova.virt {CTX} [instance: {UUID}] juice-fake: "
             f"network-vif-plugged-{PORT} received in 3.590 seconds on node juice-c1-n0000"]
    (e,) = [e for e in parse_lines(lines, "juice-c1") if e.kind == "compute.vif_plugged"]
    assert (e.detail, e.value, e.uuid, e.component) == (f"network-vif-plugged-{PORT}", 3.59, UUID, "compute")


def test_the_vif_plugged_phase_is_cut_out_of_the_spawn() -> None:
    ms = {"received": 0.0, "compute_in": 1.0, "claimed": 1.5, "imaged": 2.0, "vif_wait": 2.5,
          "plugged": 6.0, "spawned": 6.25, "done": 6.5}
    got = {ph: round(end - start, 6) for ph, _, _, start, end in flow.segments(ms)}
    spawn = sum(round(end - start, 6) for ph, _, _, start, end in flow.segments(ms) if ph == "spawn")
    assert (got["image"], got["vif_plugged"], spawn, got["finish"]) == (0.5, 3.5, 0.75, 0.25)
    assert sum(end - start for _, _, _, start, end in flow.segments(ms)) == pytest.approx(6.5)
    without = {k: v for k, v in ms.items() if k not in ("vif_wait", "plugged")}  # fake-neutron
    got = {ph: round(end - start, 6) for ph, _, _, start, end in flow.segments(without)}
    assert "vif_plugged" not in got and got["spawn"] == 4.25
    assert flow.PHASES.index("spawn") < flow.PHASES.index("vif_plugged") < flow.PHASES.index("finish")
    # compared with OSProfiler (no such span): named only when it is an end of the segment
    assert _covered("compute_in", "done") == "claim+spawn+finish"
    assert _covered("vif_wait", "plugged") == "vif_plugged"


def test_a_missed_vif_plugged_event_is_named_with_what_governs_it() -> None:
    got = cause_of("Build of instance x aborted: Failed to allocate the network(s), not rescheduling.")
    assert got is not None and got[0].startswith("network-vif-plugged not received")
    assert "vif_plugging_timeout" in got[1]
    assert cause_of("PortBindingFailed: Binding failed for port p")[0] == "network service error"  # type: ignore[index]


def test_neutron_and_ovn_logs_are_their_own_components() -> None:
    assert stream_component("neutron-api") == "neutron" and stream_component("juice-api") == "api"
    assert stream_component("ovsdb-sb") == "ovn" and stream_component("ovn-northd") == "ovn"
