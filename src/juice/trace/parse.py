"""oslo.log lines → trace events, fast: only the lines a boot trace needs are decoded.

    events = parse_files([Path("logs/juice-api.log"), ...])   # list[Event], any order
    events = parse_lines(lines, stream="juice-c1")            # the same, from text lines

Both formats oslo.log writes are read, line by line, whichever a file holds:
- the default text format (``logging_context_format_string``)::

    2026-11-22 21:07:00.233 21669 INFO nova.api.openstack.requestlog [None req-41b3… user project - - default
    default] 10.210.1.2 "POST /v2.1/servers" status: 202 len: 372 microversion: 2.37 time: 0.419999

  the bracket holds ``global_request_id request_id user …`` ("None" when no global id: nova's own
  services; placement shows nova's id first, its own second), ``[instance: <uuid>]`` may open the
  message;
- oslo.log's JSON format (``use_json = True``): one object per line with ``created`` (epoch s),
  ``levelname``, ``name``, ``message``, ``msg`` (the message *template*, used for the error
  table), ``context.request_id`` / ``context.global_request_id``, ``hostname``, ``extra``.

Speed: a file is scanned with ``bytes.find`` for a few fixed phrases (``PHRASES``): only lines
holding one are decoded and matched (a scheduler at DEBUG writes ~1 KB lines of weights and host
states, none of which a trace needs). Files, and large files cut at line boundaries, are parsed
in parallel processes (``workers``).

Timestamps of text logs are read as UTC (oslo.log writes the host's local time: on a host not
in UTC the clock-skew correction absorbs the constant offset, or give ``tz_offset_s``). Every
event of a file is timed by its line (a notification's own UTC timestamp only refines its line's
millisecond when the two agree), so a file never mixes two time bases.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# the fixed phrases a trace needs (bytes.find over the raw file; a line holding none is skipped)
PHRASES: tuple[bytes, ...] = (
    b"requestlog",                       # nova-api and placement: one line per HTTP request
    b"oslo.messaging.notification.",     # versioned notifications (log driver), text format
    b'"event_type": ',                   # … and in JSON logs (escaped inside "message")
    b"seconds to select destinations",   # super-conductor: scheduler call returned
    b"Selected host: ",                  # conductor and scheduler decisions
    b"Starting to schedule for instances",
    b"Attempting to claim resources",
    b"Rescheduling: True",
    b"Claim successful on node",
    b"juice-fake: image ",               # the simulated node's image fetch (juice_nova.virt)
    b"juice-fake: network-vif-plugged-",  # the spawn's wait for neutron's event (juice_nova.virt)
    b"seconds to spawn the instance",
    b"seconds to build instance",
    b"hosts available but",
    b"Unable to successfully claim",
    b"Got no allocation candidates",
    b" ERROR ", b" WARNING ", b" CRITICAL ",            # text levels
    b'"levelname": "ERROR"', b'"levelname": "WARNING"', b'"levelname": "CRITICAL"',
    b"keystone.server.flask.request_processing",         # keystone's request lines
)
CHUNK = 64 << 20          # bytes per parallel piece of a large file
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
UUID = re.compile(UUID_RE)
BARE_UUID = re.compile(r"(?<![-\w])" + UUID_RE)
TEXT = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d(?:\.\d+)?) (\d+) ([A-Z]+) (\S+) "
                  r"\[([^\]]*)\] ?(.*)")
INSTANCE = re.compile(r"\[instance: (" + UUID_RE + r")\] ?")
HTTP = re.compile(r'(\S+) "(GET|POST|PUT|DELETE|PATCH|HEAD) ([^" ]+)[^"]*" status: (\d+)'
                  r"(?: len: \d+)?(?: microversion: \S+)?(?: time: ([\d.]+))?")
KS_HTTP = re.compile(r"(GET|POST|PUT|DELETE|PATCH|HEAD) (\S+)")
TOOK = re.compile(r"Took ([\d.]+) seconds to (select destinations|spawn the instance|build instance)")
COND_SELECTED = re.compile(r"Selected host: ([^;\s]+); Selected node: ([^;\s]+); Alternates: (.*)")
SCHED_SELECTED = re.compile(r"Selected host: \(([^,]+), ([^)]+)\)")
CLAIM_NODE = re.compile(r"Claim successful on node (\S+)")
IMAGED = re.compile(r"juice-fake: image \S+ (?:fetched from glance in ([\d.]+) seconds|"
                    r"found in the image cache)")
VIF_PLUGGED = re.compile(r"juice-fake: (network-vif-plugged-\S+(?:, network-vif-plugged-\S+)*) "
                         r"received in ([\d.]+) seconds")
SERVERS_POST = re.compile(r"/servers/?(\?.*)?$")
NUMBERS = re.compile(r"\b0x[0-9a-f]+\b|\b\d+(\.\d+)?\b")
REQ = re.compile(r"req-" + UUID_RE)
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# a line of a traceback oslo.log wrote under the error's own prefix (each its own log line)
TRACEBACK_LINE = re.compile(r'Traceback \(most recent call last\)|File "|\s|\^+\s*$|$|'
                            r"\(Background on this error|During handling of the above exception|"
                            r"The above exception was the direct cause|\[(SQL|parameters): ")

COMPONENTS = ("api", "conductor", "scheduler", "compute", "placement", "keystone", "glance")


@dataclass(frozen=True, slots=True)
class Event:
    """One thing a service logged that a trace uses (times are the stream's local clock)."""

    t: float                 # epoch seconds, as the stream's clock says
    stream: str              # the log stream (file stem): one clock unless told otherwise
    component: str           # api | conductor | scheduler | compute | placement | keystone | other
    kind: str                # e.g. api.received, scheduler.received, compute.create.end, error
    greq: str | None         # global request id (None: not set)
    req: str | None          # the service's own request id
    uuid: str | None         # instance uuid, when the line names one
    level: str
    host: str | None = None  # selected/compute host, or the notification's publisher host
    peer: str | None = None  # HTTP: the client's address
    value: float | None = None   # a duration the line states (s), or an HTTP status
    detail: str | None = None    # HTTP path, error message, alternates…
    template: str | None = None  # errors: the message template (JSON: oslo's msg; text: normalised)

    @property
    def rid(self) -> str | None:
        """The request this event belongs to: the global id when one was passed, else its own."""
        return self.greq or self.req


def stream_component(name: str) -> str | None:
    """A component from a log file's name (``juice-sched-2`` → scheduler, ``juice-c1-n0002`` →
    compute), else None."""
    n = name.lower()
    for key, comp in (("sched", "scheduler"), ("conductor", "conductor"), ("placement", "placement"),
                      ("keystone", "keystone"), ("glance", "glance"), ("neutron", "neutron"),
                      ("ovsdb", "ovn"), ("northd", "ovn"), ("compute", "compute"), ("api", "api")):
        if key in n:
            return comp
    if re.search(r"(^|[-_])c\d+(-n\d+)?$", n):  # juice-c3, or a forked node's juice-c3-n0001
        return "compute"
    return None


def logger_component(logger: str, default: str | None) -> str:
    for prefix, comp in (("nova.api", "api"), ("nova.conductor", "conductor"),
                         ("nova.scheduler", "scheduler"), ("nova.compute", "compute"),
                         ("placement", "placement"), ("keystone", "keystone"), ("neutron", "neutron")):
        if logger.startswith(prefix):
            return comp if default is None or comp == default or default == "other" else default
    return default or "other"


def template_of(message: str) -> str:
    """A message without its ids, numbers and quoted values: a template to count errors by."""
    m = INSTANCE.sub("", message)
    m = REQ.sub("<req>", m)
    m = UUID.sub("<uuid>", m)
    m = QUOTED.sub("<v>", m)
    m = NUMBERS.sub("<n>", m)
    return m.strip()[:200]


_DAY: dict[str, float] = {}


def _day(date: str) -> float:
    d = _DAY.get(date)
    if d is None:
        d = datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
        _DAY[date] = d
    return d


class _Ctx:
    __slots__ = ("comp", "stream", "tz")

    def __init__(self, stream: str, comp: str | None, tz: float) -> None:
        self.stream, self.comp, self.tz = stream, comp, tz


def _split_ctx(bracket: str) -> tuple[str | None, str | None]:
    toks = bracket.split()
    if not toks or toks[0] == "-":
        return None, None
    g = toks[0] if toks[0].startswith("req-") else None
    r = toks[1] if len(toks) > 1 and toks[1].startswith("req-") else (None if g else None)
    if g and not r:   # "[req-x - - …]": a single id is the service's own
        return None, g
    return g, r


def _events(c: _Ctx, t: float, level: str, logger: str, greq: str | None, req: str | None,
            uuid: str | None, msg: str, template: str | None, hostname: str | None) -> Iterator[Event]:
    comp = logger_component(logger, c.comp)
    ev: dict[str, Any] = dict(stream=c.stream, component=comp, greq=greq, req=req, uuid=uuid, level=level)
    if "notification." in logger or msg.startswith("{"):
        i = msg.find("{")
        if i >= 0:
            yield from _notification(c, t, msg[i:], ev)
            return
    if logger.endswith("requestlog"):
        m = HTTP.search(msg)
        if m:
            peer, method, path, status, took = m.groups()
            path = path.split("?", 1)[0]
            if comp == "api":
                if method == "POST" and SERVERS_POST.search(path):
                    dt = float(took) if took else 0.0
                    code = float(status)
                    yield Event(t=t - dt, kind="api.received", peer=peer, detail=path, value=code, **ev)
                    yield Event(t=t, kind="api.returned", peer=peer, detail=path, value=code, **ev)
                return
            if comp == "placement":
                kind = ("placement.candidates" if path.startswith("/allocation_candidates") else
                        "placement.claim" if method == "PUT" and path.startswith("/allocations/") else
                        "placement.get_allocations" if method == "GET" and path.startswith("/allocations/")
                        else "placement.delete_allocations" if method == "DELETE" and
                        path.startswith("/allocations/") else "placement.other")
                if uuid is None and path.startswith("/allocations/"):
                    uuid = path.rsplit("/", 1)[-1] or None
                    ev["uuid"] = uuid
                yield Event(t=t, kind=kind, peer=peer, detail=f"{method} {path}", value=float(status), **ev)
                return
    if comp == "keystone" and "request_processing" in logger:
        m2 = KS_HTTP.search(msg)
        if m2:
            yield Event(t=t, kind="keystone.request", detail=f"{m2.group(1)} {m2.group(2)}", **ev)
            return
    if level in ("ERROR", "WARNING", "CRITICAL"):
        if TRACEBACK_LINE.match(msg):  # oslo.log writes a traceback a line at a time: not an error each
            return
        yield Event(t=t, kind="error", detail=msg[:500], template=template or template_of(msg),
                    host=hostname, **ev)
        low = msg
        if "Failed to compute_task_build_instances" in low or "Failed to schedule instances" in low:
            yield Event(t=t, kind="conductor.build_failed", detail=msg[:500], **ev)
        return
    if "Took " in msg:
        m = TOOK.search(msg)
        if m:
            what = m.group(2)
            kind = {"select destinations": "conductor.scheduled", "spawn the instance": "compute.spawned",
                    "build instance": "compute.built"}[what]
            yield Event(t=t, kind=kind, value=float(m.group(1)), **ev)
        return
    if "Selected host: " in msg:
        m = COND_SELECTED.search(msg)
        if m and comp != "scheduler":
            yield Event(t=t, kind="conductor.selected", host=m.group(1), detail=m.group(2),
                        value=float(m.group(3).count("('")), **ev)
            return
        m = SCHED_SELECTED.search(msg)
        if m:
            yield Event(t=t, kind="scheduler.selected", host=m.group(1), detail=m.group(2), **ev)
        return
    if "Starting to schedule for instances" in msg:
        uuids = UUID.findall(msg)
        ev.pop("uuid")
        for u in uuids or [None]:
            yield Event(t=t, kind="scheduler.received", uuid=u, value=float(len(uuids)), **ev)
        return
    if "Attempting to claim resources" in msg:
        m = UUID.search(msg)
        if m:
            ev["uuid"] = m.group(0)
        yield Event(t=t, kind="scheduler.claiming", **ev)
        return
    if "Rescheduling: True" in msg:
        yield Event(t=t, kind="conductor.rescheduling", **ev)
        return
    if "Claim successful on node" in msg:
        m = CLAIM_NODE.search(msg)
        yield Event(t=t, kind="compute.claimed", detail=m.group(1) if m else None, **ev)
        return
    if "juice-fake: image " in msg:
        m = IMAGED.search(msg)
        if m:  # the node has the image: downloaded through glance (its seconds), or its cached copy
            yield Event(t=t, kind="compute.imaged", value=float(m.group(1) or 0.0),
                        detail="glance" if m.group(1) else "cache", **ev)
        return
    if "juice-fake: network-vif-plugged-" in msg:
        m = VIF_PLUGGED.search(msg)
        if m:  # neutron's network-vif-plugged reached the spawn, which waited its seconds for it
            yield Event(t=t, kind="compute.vif_plugged", value=float(m.group(2)), detail=m.group(1), **ev)
        return
    if any(p in msg for p in ("hosts available but", "Unable to successfully claim",
                              "no allocation candidates")):
        yield Event(t=t, kind="scheduler.no_hosts", detail=msg[:300], **ev)


NOTE_KINDS = {"instance.create.start": "compute.create.start", "instance.create.end": "compute.create.end",
              "instance.create.error": "compute.create.error",
              "scheduler.select_destinations.start": "scheduler.start",
              "scheduler.select_destinations.end": "scheduler.end"}


NOTE_AGREE_S = 0.002    # a notification's timestamp within this of its line's time refines it


def _notification(c: _Ctx, t: float, text: str, ev: dict[str, Any]) -> Iterator[Event]:
    try:
        msg = json.loads(text)
    except ValueError:
        return
    if isinstance(msg, dict) and isinstance(msg.get("message"), dict):
        msg = msg["message"]
    if not isinstance(msg, dict):
        return
    kind = NOTE_KINDS.get(str(msg.get("event_type")))
    if kind is None:
        return
    data = ((msg.get("payload") or {}).get("nova_object.data") or {})
    uuid = data.get("uuid") or data.get("instance_uuid")
    pub = str(msg.get("publisher_id") or "")
    host = data.get("host") or (pub.split(":", 1)[1] if ":" in pub else None)
    ts = msg.get("timestamp")
    if isinstance(ts, str):   # the notification's own time (µs, UTC) refines the line's (ms) only
        tt = _iso(ts)         # when the two agree: a file keeps one time base (a host logging local
        if tt is not None and abs(tt - t) < NOTE_AGREE_S:   # time, or lines shifted by a tool,
            t = tt                                          # would mix two clocks in one stream)
    ev = {**ev, "component": "scheduler" if kind.startswith("scheduler") else "compute",
          "uuid": str(uuid) if uuid else ev.get("uuid")}
    detail = None
    template = None
    if kind == "compute.create.error":
        fault = (data.get("fault") or {}).get("nova_object.data") or {}
        detail = f"{fault.get('exception', '')}: {fault.get('exception_message', '')}"
        template = template_of(detail)
    yield Event(t=t, kind=kind, host=str(host) if host else None, detail=detail, template=template, **ev)


def _iso(ts: str) -> float | None:
    # "2026-11-22 21:07:01.014210" or "2026-11-22T21:07:01.014210Z"/"+00:00"
    s = ts.replace("T", " ").rstrip("Z")
    if "+" in s[10:]:
        s = s[: 10 + s[10:].index("+")]
    try:
        return _day(s[:10]) + int(s[11:13]) * 3600 + int(s[14:16]) * 60 + float(s[17:])
    except (ValueError, IndexError):
        return None


def _text_line(c: _Ctx, line: str) -> Iterator[Event]:
    m = TEXT.match(line)
    if m is None:   # a traceback line (oslo.log's exception prefix has no context): its first
        return      # line, with the context, carries the exception's summary
    date, hh, mm, ss, _pid, level, logger, bracket, msg = m.groups()
    t = _day(date) + int(hh) * 3600 + int(mm) * 60 + float(ss) - c.tz
    greq, req = _split_ctx(bracket)
    uuid = None
    if msg.startswith("[instance: "):
        mi = INSTANCE.match(msg)
        if mi:
            uuid = mi.group(1)
            msg = msg[mi.end():]
    yield from _events(c, t, level, logger, greq, req, uuid, msg, None, None)


def _json_line(c: _Ctx, line: str) -> Iterator[Event]:
    try:
        d = json.loads(line)
    except ValueError:
        return
    if not isinstance(d, dict) or "created" not in d:
        return
    ctx = d.get("context") or {}
    greq = ctx.get("global_request_id") or None
    req = ctx.get("request_id") or None
    extra = d.get("extra") or {}
    uuid = extra.get("instance_uuid") if isinstance(extra, dict) else None
    inst = extra.get("instance") if isinstance(extra, dict) else None
    if not uuid and isinstance(inst, dict):  # real use_json records carry the instance object:
        uuid = inst.get("uuid")              # its own uuid, not the first one in it (image_ref...)
    elif not uuid and inst:
        m = UUID.search(str(inst))
        uuid = m.group(0) if m else None
    msg = str(d.get("message") or "")
    level = str(d.get("levelname") or "")
    tmpl = d.get("msg") if level in ("ERROR", "WARNING", "CRITICAL") else None
    if tmpl is not None:
        tmpl = template_of(str(tmpl))
    yield from _events(c, float(d["created"]) - c.tz, level, str(d.get("name") or ""), greq, req,
                       str(uuid) if uuid else None, msg, tmpl, d.get("hostname"))


def parse_lines(lines: Iterable[str], stream: str, component: str | None = None,
                tz_offset_s: float = 0.0) -> list[Event]:
    """Events from oslo.log lines (text or JSON, mixed), every line examined."""
    c = _Ctx(stream, component or stream_component(stream), tz_offset_s)
    out: list[Event] = []
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            continue
        out.extend(_json_line(c, line) if line.startswith("{") else _text_line(c, line))
    return out


def _wanted_lines(buf: bytes) -> list[str]:
    starts: set[int] = set()
    for ph in PHRASES:
        i = buf.find(ph)
        while i >= 0:
            s = buf.rfind(b"\n", 0, i) + 1
            starts.add(s)
            e = buf.find(b"\n", i)
            if e < 0:
                break
            i = buf.find(ph, e)
    out = []
    for s in sorted(starts):
        e = buf.find(b"\n", s)
        out.append(buf[s: e if e >= 0 else len(buf)].decode("utf-8", "replace"))
    return out


@dataclass(frozen=True)
class Piece:
    path: str
    start: int
    end: int
    stream: str
    component: str | None
    tz: float


def _parse_piece(p: Piece) -> list[Event]:
    with open(p.path, "rb") as f:
        f.seek(p.start)
        buf = f.read(p.end - p.start)
    return parse_lines(_wanted_lines(buf), p.stream, p.component, p.tz)


def pieces(paths: Sequence[Path], chunk: int = CHUNK, streams: dict[Path, str] | None = None,
           tz_offset_s: float = 0.0) -> list[Piece]:
    """The files cut at line boundaries into pieces of about ``chunk`` bytes."""
    out = []
    for path in paths:
        size = path.stat().st_size
        stream = (streams or {}).get(path) or path.name.split(".")[0]
        comp = stream_component(stream)
        start = 0
        with path.open("rb") as f:
            while start < size:
                end = min(size, start + chunk)
                if end < size:
                    f.seek(end)
                    rest = f.readline()
                    end += len(rest)
                out.append(Piece(str(path), start, end, stream, comp, tz_offset_s))
                start = end
    return out


def parse_files(paths: Sequence[Path], workers: int | None = None, streams: dict[Path, str] | None = None,
                tz_offset_s: float = 0.0, chunk: int = CHUNK) -> list[Event]:
    """Events of every file (stream = the file's stem unless ``streams`` names it), parsed in
    ``workers`` processes (default: the CPUs; 1 = in this process)."""
    ps = pieces(paths, chunk, streams, tz_offset_s)
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n <= 1 or len(ps) <= 1:
        return [e for p in ps for e in _parse_piece(p)]
    with ProcessPoolExecutor(max_workers=min(n, len(ps))) as pool:
        return [e for evs in pool.map(_parse_piece, ps) for e in evs]
