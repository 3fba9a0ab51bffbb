"""oslo.log lines (real ones, from Juice's nova runs: tests/fixtures/trace/) → trace events."""

from __future__ import annotations

import json
from pathlib import Path

from juice.trace.parse import PHRASES, parse_files, parse_lines, template_of

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trace"
LOGS = FIX / "boot" / "logs"


def _lines(name: str, needle: str) -> list[str]:
    return [ln for ln in (LOGS / name).read_text().splitlines() if needle in ln]


def test_api_post_gives_received_and_returned() -> None:
    line = _lines("juice-api.log", '"POST /v2.1/servers"')[0]
    ev = parse_lines([line], "juice-api")
    assert [e.kind for e in ev] == ["api.received", "api.returned"]
    recv, ret = ev
    assert ret.t - recv.t == 0.419999 or abs(ret.t - recv.t - 0.419999) < 1e-6
    assert recv.greq is None and recv.req == "req-41b3e7e4-f133-4537-8478-306562b46c71"
    assert recv.component == "api" and ret.value == 202


def test_placement_line_has_global_and_local_request_ids_and_the_instance() -> None:
    line = _lines("placement.log", '"PUT /allocations/ee0e3618')[0]
    (e,) = parse_lines([line], "placement")
    assert e.kind == "placement.claim" and e.value == 204
    assert e.greq == "req-41b3e7e4-f133-4537-8478-306562b46c71" and e.req and e.req != e.greq
    assert e.rid == e.greq and e.uuid == "ee0e3618-68b3-4e67-b428-9b190b90da2b" and e.peer == "10.210.1.2"


def test_conductor_scheduler_compute_milestones() -> None:
    cond = parse_lines(_lines("juice-conductor.log", "req-41b3e7e4"), "juice-conductor")
    kinds = {e.kind: e for e in cond}
    assert kinds["conductor.scheduled"].value == 0.56
    sel = kinds["conductor.selected"]
    assert sel.host == "juice-c1" and sel.value == 2 and sel.uuid == "ee0e3618-68b3-4e67-b428-9b190b90da2b"
    sched = parse_lines(_lines("juice-sched-1.log", "req-41b3e7e4"), "juice-sched-1")
    got = [e.kind for e in sched]
    for k in ("scheduler.received", "scheduler.start", "scheduler.claiming", "scheduler.selected",
              "scheduler.end"):
        assert k in got, got
    comp = parse_lines(_lines("juice-c1.log", "req-41b3e7e4"), "juice-c1")
    got = [e.kind for e in comp]
    assert got.index("compute.create.start") < got.index("compute.claimed") < got.index("compute.create.end")
    start = next(e for e in comp if e.kind == "compute.create.start")
    assert start.host == "juice-c1" and start.component == "compute"


def test_notification_time_is_its_own_utc_timestamp() -> None:
    line = _lines("juice-c1.log", "instance.create.end")[0]
    (e,) = parse_lines([line], "juice-c1")
    ts = json.loads(line[line.index("{"):])["timestamp"]
    assert ts.startswith("2026-11-22 21:07") and abs(e.t - 1795381621.23) < 1.0


def test_errors_are_templated_and_no_valid_host_is_a_conductor_failure() -> None:
    lines = [ln for ln in (FIX / "novalidhost" / "logs" / "juice-conductor.log").read_text().splitlines()
             if "Failed to schedule instances" in ln]
    ev = parse_lines(lines, "juice-conductor")
    kinds = [e.kind for e in ev]
    assert kinds.count("error") == 2 and kinds.count("conductor.build_failed") == 2
    assert all("No valid host" in (e.detail or "") for e in ev)
    assert template_of("[instance: ee0e3618-68b3-4e67-b428-9b190b90da2b] Took 0.23 seconds, req-"
                       "41b3e7e4-f133-4537-8478-306562b46c71 'x'") == "Took <n> seconds, <req> <v>"


def test_traceback_lines_are_skipped() -> None:
    tb = [ln for ln in (FIX / "novalidhost" / "logs" / "juice-conductor.log").read_text().splitlines()
          if "ERROR nova.conductor.manager   File" in ln]
    assert tb and parse_lines(tb, "juice-conductor") == []


def test_json_format_lines() -> None:
    # oslo.log's JSONFormatter (use_json) for the same API request line
    text = _lines("juice-api.log", '"POST /v2.1/servers"')[0]
    msg = text.split("default default] ", 1)[1]
    rec = {"message": msg, "asctime": "2026-11-22 21:07:00,233", "name": "nova.api.openstack.requestlog",
           "msg": '%(REMOTE_ADDR)s "%(REQUEST_METHOD)s %(REQUEST_URI)s" status: %(status)s len: %(len)s '
                  'microversion: %(microversion)s time: %(time)s', "levelname": "INFO",
           "created": 1795381620.233, "hostname": "h1",
           "context": {"request_id": "req-41b3e7e4-f133-4537-8478-306562b46c71", "global_request_id": None},
           "extra": {"project": "nova"}}
    ev = parse_lines([json.dumps(rec)], "juice-api")
    assert [e.kind for e in ev] == ["api.received", "api.returned"]
    assert ev[1].t == 1795381620.233 and ev[0].req == "req-41b3e7e4-f133-4537-8478-306562b46c71"
    err = {**rec, "levelname": "ERROR", "name": "nova.compute.manager", "message": "Instance failed to spawn",
           "msg": "Instance failed to spawn",
           "extra": {"instance_uuid": "ee0e3618-68b3-4e67-b428-9b190b90da2b"}}
    (e,) = parse_lines([json.dumps(err)], "juice-c1")
    assert e.kind == "error" and e.template == "Instance failed to spawn"
    assert e.uuid is not None and e.uuid.startswith("ee0e3618")


def test_prefilter_keeps_every_event_of_a_full_parse(tmp_path: Path) -> None:
    files = sorted(LOGS.glob("*.log"))
    fast = parse_files(files, workers=1)
    full = [e for f in files for e in parse_lines(f.read_text().splitlines(), f.stem)]
    assert sorted(map(repr, fast)) == sorted(map(repr, full))
    # cut into tiny pieces, in two processes: the same events
    pieces = parse_files(files, workers=2, chunk=4096)
    assert sorted(map(repr, pieces)) == sorted(map(repr, fast))
    assert all(isinstance(p, bytes) for p in PHRASES)
