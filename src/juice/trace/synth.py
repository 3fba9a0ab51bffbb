"""Log streams made from real ones, for tests and benchmarks of tracing.

    shift_run(run, dest, {"site2": 0.75})        # the run's logs, site 2's clock 0.75 s ahead
    replicate(run, dest, copies=25)              # ~25× the logs: one day later per copy, new ids
    split_compute(logs, dest, "juice-c1", ["cmp1", "cmp2", "cmp3"])   # one compute → 3 hosts
    to_json(text_log_bytes, hostname="ctl")       # the same lines as oslo.log JSON records

``shift_run`` moves every timestamp a stream carries: the oslo.log text prefix, oslo.log JSON's
``created``/``asctime``, and the notification's own ``"timestamp"`` (what a host with a skewed
clock would have written); boots.parquet (the client's clock, the reference) is copied as is.
``replicate`` keeps each copy's lines identical except the date (+1 day per copy) and the
request ids (a per-copy prefix), so a copy traces like the original. ``split_compute`` deals a
compute's instances out to several hosts (each its own log file, its host name in every line
about its instances: the conductor's and scheduler's choices, the notifications), so several
computes can be given different clocks; ``to_json`` writes what ``use_json = True`` would have.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

TEXT_TS = re.compile(rb"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{3})", re.M)
NOTE_TS = re.compile(rb'(\\?"timestamp\\?": \\?")(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)(\\?")')
CREATED = re.compile(rb'("created": )([0-9.]+)')
FMT_MS = "%Y-%m-%d %H:%M:%S.%f"


def _shift_text(m: re.Match[bytes], dt: float) -> bytes:
    raw = m.group(1).decode()
    sep = "T" if "T" in raw else " "
    t = datetime.strptime(raw.replace("T", " "), FMT_MS).replace(tzinfo=UTC) + timedelta(seconds=dt)
    return t.strftime(FMT_MS)[:-3].replace(" ", sep, 1).encode()


def _shift_note(m: re.Match[bytes], dt: float) -> bytes:
    raw = m.group(2).decode()
    sep = "T" if "T" in raw else " "
    fmt = FMT_MS if "." in raw else "%Y-%m-%d %H:%M:%S"
    t = datetime.strptime(raw.replace("T", " "), fmt).replace(tzinfo=UTC) + timedelta(seconds=dt)
    return m.group(1) + t.strftime(FMT_MS).replace(" ", sep, 1).encode() + m.group(3)


def shift_bytes(data: bytes, dt: float, payloads: bool = True) -> bytes:
    """Every timestamp in oslo.log lines (text or JSON) moved by ``dt`` seconds (``payloads``
    False: not the notifications' own timestamps, as a tool shifting line prefixes does, or as
    a host writing local time in its lines and UTC in its notifications looks)."""
    if not dt:
        return data
    data = TEXT_TS.sub(lambda m: _shift_text(m, dt), data)
    if payloads:
        data = NOTE_TS.sub(lambda m: _shift_note(m, dt), data)
    return CREATED.sub(lambda m: m.group(1) + repr(float(m.group(2)) + dt).encode(), data)


def shift_run(run: Path, dest: Path, clock_offsets: Mapping[str, float],
              clocks: Mapping[str, str] | None = None) -> Path:
    """A copy of a run (manifest, boots.parquet, logs/) whose streams on clock ``c`` read
    ``clock_offsets[c]`` seconds ahead of the truth (clocks: stream → clock; default the run's
    sites, see ``tables.run_clocks``)."""
    from juice.trace.tables import run_clocks

    cmap = dict(clocks) if clocks is not None else run_clocks(run)
    dest.mkdir(parents=True, exist_ok=True)
    for f in run.iterdir():
        if f.is_file():
            shutil.copy2(f, dest / f.name)
    (dest / "logs").mkdir(exist_ok=True)
    for f in sorted((run / "logs").iterdir()):
        stream = f.name.split(".")[0]
        dt = clock_offsets.get(cmap.get(stream, stream), 0.0)
        (dest / "logs" / f.name).write_bytes(shift_bytes(f.read_bytes(), dt))
    return dest


def replicate(run: Path, dest: Path, copies: int) -> list[Path]:
    """``dest/<stream>.log`` = ``copies`` copies of each log of ``run`` one after the other,
    copy k one day later than the original and with its request ids prefixed ``req-k<k>-``."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for f in sorted((run / "logs").iterdir()):
        data = f.read_bytes()
        dates = sorted(set(re.findall(rb"^(\d{4}-\d\d-\d\d)[ T]", data, re.M)))
        path = dest / f.name
        with path.open("wb") as fh:
            for k in range(copies):
                chunk = data.replace(b"req-", b"req-k%d-" % k) if k else data
                for d in dates:
                    new = (datetime.strptime(d.decode(), "%Y-%m-%d") + timedelta(days=k)).strftime("%Y-%m-%d")
                    chunk = chunk.replace(d, new.encode())
                fh.write(chunk)
        out.append(path)
    man = run / "manifest.json"
    if man.is_file():
        (dest / "manifest.json").write_text(json.dumps(json.loads(man.read_text())))
    return out


def _instance_of(line: bytes, instances: set[bytes], by_req: dict[bytes, bytes]) -> bytes | None:
    for u in UUID_B.findall(line):
        if u in instances:
            return bytes(u)
    for r in REQ_B.findall(line):
        if r in by_req:
            return by_req[r]
    return None


UUID_B = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
REQ_B = re.compile(rb"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def split_compute(logs: Path, dest: Path, compute: str, hosts: Sequence[str]) -> dict[str, list[str]]:
    """``logs/*.log`` copied to ``dest`` with the compute ``compute`` (its file stem and host name)
    split into ``hosts``: instance k of the compute (sorted uuids) goes to ``hosts[k % n]``, its
    lines to ``dest/<host>.log`` and every line of any file about it names that host instead.
    Returns host → its instances."""
    dest.mkdir(parents=True, exist_ok=True)
    src = (logs / f"{compute}.log").read_bytes()
    instances = sorted({u for ln in src.splitlines() if b"instance" in ln for u in UUID_B.findall(ln)
                        if b"[instance: " + u in ln or b'"uuid": "' + u in ln})
    owner = {u: hosts[k % len(hosts)].encode() for k, u in enumerate(instances)}
    by_req: dict[bytes, bytes] = {}
    for ln in src.splitlines():
        u = _instance_of(ln, set(instances), {})
        if u is not None:
            for r in REQ_B.findall(ln):
                by_req.setdefault(r, u)
    name = compute.encode()

    def moved(line: bytes) -> tuple[bytes, bytes | None]:
        u = _instance_of(line, set(instances), by_req)
        if u is None:
            return line, None
        return re.sub(rb"\b" + re.escape(name) + rb"\b", owner[u], line), owner[u]

    out: dict[bytes, list[bytes]] = {h.encode(): [] for h in hosts}
    for ln in src.splitlines(keepends=True):
        new, h = moved(ln)
        out[h or hosts[0].encode()].append(new)
    for h, lines in out.items():
        (dest / f"{h.decode()}.log").write_bytes(b"".join(lines))
    for f in sorted(logs.iterdir()):
        if f.is_file() and f.stem != compute:
            (dest / f.name).write_bytes(b"".join(moved(ln)[0] for ln in f.read_bytes().splitlines(True)))
    return {h: [u.decode() for u in instances if owner[u] == h.encode()] for h in hosts}


def to_json(data: bytes, hostname: str) -> bytes:
    """oslo.log text lines as oslo.log JSON records (``use_json``), one per line, written on
    ``hostname``: ``created``, ``levelname``, ``name``, ``message``, ``msg``, ``context`` (request
    ids), ``extra.instance_uuid``. Traceback lines (no prefix) go into the record before them."""
    from juice.trace.parse import INSTANCE, TEXT, _split_ctx

    recs: list[dict[str, object]] = []
    for raw in data.decode("utf-8", "replace").splitlines():
        m = TEXT.match(raw)
        if m is None:
            if recs:
                recs[-1]["traceback"] = f"{recs[-1].get('traceback', '')}{raw}\n"
            continue
        date, hh, mm, ss, pid, level, logger, bracket, msg = m.groups()
        created = datetime.strptime(f"{date} {hh}:{mm}:{ss}", FMT_MS).replace(tzinfo=UTC).timestamp()
        greq, req = _split_ctx(bracket)
        extra: dict[str, object] = {"project": logger.split(".")[0]}
        mi = INSTANCE.match(msg)
        if mi:
            extra["instance_uuid"] = mi.group(1)
            msg = msg[mi.end():]
        recs.append({"message": msg, "asctime": f"{date} {hh}:{mm}:{ss}".replace(".", ","), "name": logger,
                     "msg": msg, "levelname": level, "created": round(created, 6), "process": int(pid),
                     "hostname": hostname, "context": {"request_id": req, "global_request_id": greq},
                     "extra": extra})
    return b"".join(json.dumps(r).encode() + b"\n" for r in recs)
