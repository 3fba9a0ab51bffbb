"""Traced boots as OpenTelemetry traces, OTLP/JSON (the protobuf JSON mapping of
``ExportTraceServiceRequest``): load them into any OTLP-speaking backend.

    doc = document(traced)                 # {"resourceSpans": [...]}
    write(traced, Path("boots.otlp.json")) # atomically

One trace per boot (request × instance; ``traceId`` = 32 hex digits derived from run, request id
and instance, so an export is reproducible). Spans (``spanId`` = 16 hex digits):

- the boot, the root: POST received → terminal state (or the last event seen), status ERROR with
  the error template for a failed boot; attributes ``nova.instance.uuid``, ``nova.request_id``
  (the trace's), ``nova.request_ids`` (every id its lines carry), ``host.name`` (the compute),
  ``nova.state``, ``nova.error.template``, ``nova.attempts``, ``juice.run``;
- a span per phase (``phase api``, ``phase scheduler`` …, as in ``trace_phases``), children of
  the boot, back to back;
- a span per service call, children of the boot, under a resource per service and host
  (``service.name`` nova-api / nova-conductor / nova-scheduler / nova-compute / placement,
  ``host.name`` = the file's clock): the API's POST, the conductor's scheduler call, the
  scheduler's select_destinations, each compute attempt's build, each placement request (a log
  line gives its end: a zero-length span there).

Times are the corrected ones (after the skew correction), in Unix nanoseconds as strings; a
child never starts before or ends after the boot (the root spans every child). Attribute values
follow the mapping: ``{"stringValue"}``, ``{"intValue": "<int64 as a string>"}``,
``{"doubleValue"}``, ``{"boolValue"}``, ``{"arrayValue": {"values": [...]}}``.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NotRequired, Protocol, Required, TypedDict

from juice import __version__
from juice.trace import flow
from juice.trace.parse import UUID, Event

INTERNAL, SERVER, CLIENT = 1, 2, 3          # Span.SpanKind
UNSET, OK, ERROR = 0, 1, 2                  # Status.StatusCode
SERVICE = {"api": "nova-api", "conductor": "nova-conductor", "scheduler": "nova-scheduler",
           "compute": "nova-compute", "placement": "placement", "keystone": "keystone"}


class HasTraces(Protocol):
    """What is exported: ``juice.trace.tables.Traced`` (run, boot, clocks per boot)."""

    @property
    def traces(self) -> Sequence[tuple[str, flow.Trace, Mapping[str, str]]]: ...


class OtlpValue(TypedDict, total=False):
    """OTLP/JSON's ``AnyValue``: one of these keys."""

    boolValue: bool
    intValue: str
    doubleValue: float
    stringValue: str
    arrayValue: ArrayValue


class ArrayValue(TypedDict):
    values: list[OtlpValue]


class KeyValue(TypedDict):
    key: str
    value: OtlpValue


class Status(TypedDict, total=False):
    code: Required[int]
    message: str


class Span(TypedDict):
    """One OTLP/JSON span (the fields Juice writes)."""

    traceId: str
    spanId: str
    parentSpanId: NotRequired[str]
    name: str
    kind: int
    startTimeUnixNano: str
    endTimeUnixNano: str
    attributes: list[KeyValue]
    status: Status


class ScopeSpans(TypedDict):
    scope: dict[str, str]
    spans: list[Span]


class Resource(TypedDict):
    attributes: list[KeyValue]


class ResourceSpans(TypedDict):
    resource: Resource
    scopeSpans: list[ScopeSpans]


class Document(TypedDict):
    """The OTLP/JSON export (``ExportTraceServiceRequest``)."""

    resourceSpans: list[ResourceSpans]


def _id(n: int, *parts: str) -> str:
    h = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:n]
    return h if int(h, 16) else "1".rjust(n, "0")      # all-zero ids are invalid


def _ns(t: float) -> str:
    return str(round(t * 1e9))


def attr(key: str, value: object) -> KeyValue:
    """One ``KeyValue`` of the JSON mapping."""
    return {"key": key, "value": _any(value)}


def _any(v: object) -> OtlpValue:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [_any(x) for x in v]}}
    return {"stringValue": str(v)}


def _attrs(d: Mapping[str, object]) -> list[KeyValue]:
    return [attr(k, v) for k, v in d.items() if v is not None and v != ""]


class _Boot:
    """The spans of one boot, grouped by the resource (service, host) they belong to."""

    def __init__(self, run: str, tr: flow.Trace, clocks: Mapping[str, str]) -> None:
        self.run, self.tr, self.clocks = run, tr, clocks
        self.trace_id = _id(32, run, tr.rid, tr.uuid or "")
        self.root_id = _id(16, self.trace_id, "boot")
        self.spans: dict[tuple[str, str], list[Span]] = defaultdict(list)
        self.n = 0

    def span(self, resource: tuple[str, str], name: str, kind: int, start: float, end: float,
             attrs: Mapping[str, object], status: int = UNSET, message: str = "") -> None:
        self.n += 1
        s: Span = {"traceId": self.trace_id, "spanId": _id(16, self.trace_id, name, str(self.n)),
                   "parentSpanId": self.root_id, "name": name, "kind": kind,
                   "startTimeUnixNano": _ns(start), "endTimeUnixNano": _ns(max(start, end)),
                   "attributes": _attrs(attrs), "status": {"code": status}}
        if message:
            s["status"]["message"] = message
        self.spans[resource].append(s)

    def host_of(self, e: Event) -> str:
        c = self.clocks.get(e.stream, e.stream)
        return c.split(":", 1)[1] if c.startswith("host:") else c

    def call(self, e: Event, end: Event | None, name: str, kind: int, **attrs: object) -> None:
        res = (SERVICE.get(e.component, e.component), self.host_of(e))
        self.span(res, name, kind, e.t, end.t if end is not None else e.t,
                  {"juice.stream": e.stream, "nova.request_id": e.req, **attrs})


def _route(path: str) -> str:
    return UUID.sub("{uuid}", path.split("?", 1)[0])


def _calls(b: _Boot) -> None:
    evs = b.tr.events
    by: dict[str, list[Event]] = defaultdict(list)
    for e in evs:
        by[e.kind].append(e)
    for recv, ret in zip(by["api.received"], by["api.returned"], strict=False):
        b.call(recv, ret, "POST /servers", SERVER, **{"http.request.method": "POST", "url.path": recv.detail,
                                                       "http.response.status_code": int(ret.value or 0)})
    for e in by["conductor.scheduled"]:
        start = e.t - (e.value or 0.0)
        res = (SERVICE["conductor"], b.host_of(e))
        b.span(res, "conductor select_destinations", CLIENT, start, e.t,
               {"juice.stream": e.stream, "nova.request_id": e.req, "rpc.method": "select_destinations"})
    ins = by["scheduler.received"] or by["scheduler.start"]
    outs = by["scheduler.end"] or by["scheduler.selected"]
    for s_in in ins[:1]:
        s_out = next((e for e in outs if e.stream == s_in.stream), None)
        b.call(s_in, s_out, "scheduler select_destinations", SERVER, **{"rpc.method": "select_destinations"})
    for e in evs:
        if e.kind.startswith("placement."):
            method, _, path = (e.detail or "").partition(" ")
            b.call(e, None, f"placement {method} {_route(path)}", SERVER,
                   **{"http.request.method": method, "url.path": path,
                      "http.response.status_code": int(e.value or 0), "client.address": e.peer})
    ends = [e for e in evs if e.kind in ("compute.create.end", "compute.create.error")]
    for k, st in enumerate(by["compute.create.start"], start=1):
        end = next((e for e in ends if e.stream == st.stream and e.t >= st.t), None)
        failed = end is not None and end.kind == "compute.create.error"
        res = (SERVICE["compute"], st.host or b.host_of(st))
        b.span(res, "compute build_and_run_instance", SERVER, st.t, end.t if end is not None else st.t,
               {"juice.stream": st.stream, "nova.attempt": k, "nova.compute.host": st.host,
                "nova.error.template": end.template if failed and end is not None else None},
               ERROR if failed else UNSET, (end.detail or "") if failed and end is not None else "")


def _phases(b: _Boot) -> None:
    for phase, a, c, start, end in flow.segments(b.tr.milestones):
        b.span(("nova", "boot"), f"phase {phase}", INTERNAL, start, end,
               {"juice.phase": phase, "juice.from": a, "juice.to": c})


def _root(b: _Boot) -> Span:
    tr = b.tr
    starts = [int(s["startTimeUnixNano"]) for ss in b.spans.values() for s in ss]
    ends = [int(s["endTimeUnixNano"]) for ss in b.spans.values() for s in ss]
    t0 = [round(tr.t_start * 1e9)] if tr.t_start is not None else []
    t1 = [round(tr.t_end * 1e9)] if tr.t_end is not None else []
    start, end = min(starts + t0 + t1), max(ends + t0 + t1)
    rids = sorted({x for e in tr.events for x in (e.greq, e.req) if x})
    failed = tr.state in flow.TERMINALS and tr.state != "active"
    status: Status = {"code": OK if tr.state == "active" else ERROR if failed else UNSET}
    if failed:
        status["message"] = tr.fault_template or tr.state
    return {"traceId": b.trace_id, "spanId": b.root_id, "name": "nova boot", "kind": SERVER,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(max(start, end)),
            "attributes": _attrs({"nova.instance.uuid": tr.uuid, "nova.request_id": tr.rid,
                                  "nova.request_ids": rids, "host.name": tr.host, "nova.hosts": tr.hosts,
                                  "nova.state": tr.state, "nova.error.template": tr.fault_template,
                                  "nova.error.component": tr.fault_component, "nova.attempts": tr.attempts,
                                  "nova.anomalies": len(tr.anomalies), "juice.run": b.run}),
            "status": status}


def document(traced: HasTraces) -> Document:
    """The OTLP/JSON document of every boot of a ``tables.Traced``."""
    return spans_document(traced.traces)


def spans_document(traces: Iterable[tuple[str, flow.Trace, Mapping[str, str]]]) -> Document:
    res: dict[tuple[str, str, str], list[Span]] = defaultdict(list)
    for run, tr, clocks in traces:
        b = _Boot(run, tr, clocks)
        _phases(b)
        _calls(b)
        res[("nova", "", run)].append(_root(b))
        for (service, host), spans in b.spans.items():
            res[(service, "" if host == "boot" else host, run)].extend(spans)
    scope = {"name": "juice.trace", "version": __version__}
    out: list[ResourceSpans] = []
    for (service, host, run), spans in res.items():
        ra = _attrs({"service.name": service, "host.name": host or None, "juice.run": run})
        out.append({"resource": {"attributes": ra}, "scopeSpans": [{"scope": scope, "spans": spans}]})
    return {"resourceSpans": out}


def write(traced: HasTraces, path: Path) -> int:
    """Write the document atomically; returns the number of traces."""
    from juice.util.atomic import write_text

    doc = document(traced)
    write_text(path, json.dumps(doc, separators=(",", ":")) + "\n")
    return len({s["traceId"] for r in doc["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]})


