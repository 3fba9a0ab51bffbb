"""``juice trace --otlp``: the traced boots as OTLP/JSON, checked for the structure of the
protobuf JSON mapping (resourceSpans → scopeSpans → spans, hex ids, times as strings, typed
attribute values) and for the nesting (parentSpanId, children within their parent)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from juice.trace.otlp import document
from juice.trace.tables import trace
from tests.conftest import Juice

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trace"
VALUE_KEYS = {"stringValue", "intValue", "doubleValue", "boolValue", "arrayValue"}


def _check_value(v: dict[str, Any]) -> None:
    assert len(v) == 1 and set(v) <= VALUE_KEYS, v
    if "intValue" in v:
        assert isinstance(v["intValue"], str) and re.fullmatch(r"-?\d+", v["intValue"])
    if "arrayValue" in v:
        for x in v["arrayValue"]["values"]:
            _check_value(x)


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    assert set(doc) == {"resourceSpans"}
    for rs in doc["resourceSpans"]:
        keys = {a["key"] for a in rs["resource"]["attributes"]}
        assert "service.name" in keys
        for a in rs["resource"]["attributes"]:
            _check_value(a["value"])
        for ss in rs["scopeSpans"]:
            assert ss["scope"]["name"] == "juice.trace" and ss["spans"]
            out += ss["spans"]
    return out


def _validate(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    spans = _spans(doc)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    ids = set()
    for s in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", s["traceId"]) and int(s["traceId"], 16)
        assert re.fullmatch(r"[0-9a-f]{16}", s["spanId"]) and int(s["spanId"], 16)
        assert s["spanId"] not in ids
        ids.add(s["spanId"])
        assert isinstance(s["startTimeUnixNano"], str) and s["startTimeUnixNano"].isdigit()
        assert isinstance(s["endTimeUnixNano"], str) and s["endTimeUnixNano"].isdigit()
        assert int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"])
        assert s["kind"] in (1, 2, 3) and s["status"]["code"] in (0, 1, 2) and s["name"]
        for a in s["attributes"]:
            assert isinstance(a["key"], str)
            _check_value(a["value"])
        by_trace.setdefault(s["traceId"], []).append(s)
    for tid, ss in by_trace.items():
        roots = [s for s in ss if not s.get("parentSpanId")]
        assert len(roots) == 1, tid
        own = {s["spanId"]: s for s in ss}
        for s in ss:
            if s is roots[0]:
                continue
            parent = own[s["parentSpanId"]]                    # the parent is in the same trace
            assert int(parent["startTimeUnixNano"]) <= int(s["startTimeUnixNano"])
            assert int(s["endTimeUnixNano"]) <= int(parent["endTimeUnixNano"])
    return by_trace


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_a_trace_per_boot_with_phase_and_call_spans() -> None:
    t = trace([FIX / "novalidhost"], workers=1)
    by_trace = _validate(document(t))
    assert len(by_trace) == len(t.boots) == 6
    roots = {_attrs(s)["nova.instance.uuid"]: s for ss in by_trace.values() for s in ss
             if not s.get("parentSpanId")}
    assert set(roots) == set(t.boots["uuid"])
    for b in t.boots.itertuples(index=False):
        root = roots[b.uuid]
        a = _attrs(root)
        assert a["nova.state"] == b.state and a["nova.request_id"] == b.request_id
        assert b.request_id in [x["stringValue"] for x in a["nova.request_ids"]["values"]]
        names = {s["name"] for s in by_trace[root["traceId"]]}
        assert "POST /servers" in names and "scheduler select_destinations" in names
        if b.state == "active":
            assert root["status"]["code"] == 1 and a["host.name"] == b.host
            assert {"phase api", "phase scheduler", "phase spawn"} <= names
            assert "compute build_and_run_instance" in names
        else:
            assert root["status"]["code"] == 2 and root["status"]["message"].startswith("No valid host")
            assert a["nova.error.template"].startswith("No valid host")


def test_phase_spans_are_the_phase_table(tmp_path: Path) -> None:
    t = trace([FIX / "boot"], workers=1)
    spans = _spans(document(t))
    got = {(_attrs(s)["juice.phase"], s["traceId"]):
           (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e9
           for s in spans if s["name"].startswith("phase ")}
    roots = {s["traceId"]: _attrs(s)["nova.request_id"] for s in spans if not s.get("parentSpanId")}
    ph = t.phases.set_index(["request_id", "phase"])["seconds"]
    assert len(got) == len(ph)
    for (phase, tid), secs in got.items():
        assert abs(secs - ph.loc[(roots[tid], phase)]) < 1e-6


def test_cli_writes_the_otlp_file_and_says_which_files_share_a_clock(tmp_path: Path, juice: Juice) -> None:
    out = tmp_path / "boots.otlp.json"
    code, stdout, err = juice("trace", str(FIX / "boot" / "logs"), "--otlp", str(out),
                              "--clock", "juice-api,juice-conductor,juice-sched-1=ctl")
    assert code == 0, err
    said = " ".join(err.split())  # the console wraps long paths at its width
    assert "wrote" in said and "4 traces" in said
    assert "which files share one" in stdout and "--clock" in stdout
    assert len(_validate(json.loads(out.read_text()))) == 4
    code, _, err = juice("trace", str(FIX / "boot" / "logs"), "--clock", "nova-typo=ctl")
    assert code == 2 and "--clock: no log file named nova-typo" in err
