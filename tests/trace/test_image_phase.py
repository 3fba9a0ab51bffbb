"""The trace's image phase (issue 40): a simulated node's image fetch through glance-api (or its
cached copy), logged by juice_nova.virt, ends the ``image`` phase between the claim and the
spawn; boots without it keep their phases; glance-api's own log is its own component."""

from __future__ import annotations

import pytest

from juice.trace import flow
from juice.trace.osprofiler import _covered
from juice.trace.parse import parse_lines, stream_component

UUID = "0b7f3c52-1111-4222-8333-944445555666"
CTX = "[req-aaaaaaaa-1111-4222-8333-944445555666 req-bbbbbbbb-1111-4222-8333-944445555666 admin admin - - -]"


def test_the_nodes_fetch_lines_become_image_events() -> None:
    lines = [
        f"2026-11-27 17:00:01.000 7 INFO nova.compute.claims {CTX} [instance: {UUID}] Claim successful on "
        "node juice-c1-n0001",
        f"2026-11-27 17:00:01.100 7 INFO juice_nova.virt {CTX} [instance: {UUID}] juice-fake: image "
        "5f0c-img wanted on node juice-c1-n0001",
        f"2026-11-27 17:00:01.600 7 INFO juice_nova.virt {CTX} [instance: {UUID}] juice-fake: image "
        "5f0c-img fetched from glance in 0.480 seconds (1048576 bytes) on node juice-c1-n0001",
        f"2026-11-27 17:00:02.000 7 INFO juice_nova.virt {CTX} [instance: {UUID}] juice-fake: image "
        "5f0c-img found in the image cache of node juice-c1-n0001",
    ]
    evs = [e for e in parse_lines(lines, "juice-c1") if e.kind == "compute.imaged"]
    assert [(e.detail, e.value, e.uuid, e.component) for e in evs] == [
        ("glance", 0.48, UUID, "compute"), ("cache", 0.0, UUID, "compute")]


def test_the_image_phase_sits_between_claim_and_spawn_only_when_fetched() -> None:
    ms = {"received": 0.0, "compute_in": 1.0, "claimed": 1.5, "imaged": 2.5, "spawned": 2.75, "done": 3.0}
    got = {ph: round(end - start, 6) for ph, _, _, start, end in flow.segments(ms)}
    assert (got["claim"], got["image"], got["spawn"], got["finish"]) == (0.5, 1.0, 0.25, 0.25)
    assert sum(got.values()) == pytest.approx(3.0)
    without = {k: v for k, v in ms.items() if k != "imaged"}  # a node that fetches nothing
    got = {ph: round(end - start, 6) for ph, _, _, start, end in flow.segments(without)}
    assert "image" not in got and got["spawn"] == 1.25
    assert flow.PHASES.index("claim") < flow.PHASES.index("image") < flow.PHASES.index("spawn")
    # compared with OSProfiler, which has no claim/spawn span: the image phase is named only
    # when it is an end of the compared segment
    assert _covered("compute_in", "done") == "claim+spawn+finish"
    assert _covered("claimed", "imaged") == "image"


def test_glance_api_logs_are_glances_not_nova_apis() -> None:
    assert stream_component("glance-api") == "glance" and stream_component("juice-api") == "api"
