"""Log streams made from real ones, for tests and benchmarks of tracing.

    shift_run(run, dest, {"site2": 0.75})        # the run's logs, site 2's clock 0.75 s ahead
    replicate(run, dest, copies=25)              # ~25× the logs: one day later per copy, new ids

``shift_run`` moves every timestamp a stream carries: the oslo.log text prefix, oslo.log JSON's
``created``/``asctime``, and the notification's own ``"timestamp"`` (what a host with a skewed
clock would have written); boots.parquet (the client's clock, the reference) is copied as is.
``replicate`` keeps each copy's lines identical except the date (+1 day per copy) and the
request ids (a per-copy prefix), so a copy traces like the original.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

TEXT_TS = re.compile(rb"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{3})", re.M)
NOTE_TS = re.compile(rb'("timestamp": ")(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)(")')
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


def shift_bytes(data: bytes, dt: float) -> bytes:
    """Every timestamp in oslo.log lines (text or JSON) moved by ``dt`` seconds."""
    if not dt:
        return data
    data = TEXT_TS.sub(lambda m: _shift_text(m, dt), data)
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
