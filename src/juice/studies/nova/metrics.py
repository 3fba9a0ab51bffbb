"""Boot times of a nova run: Rally's view (the ``nova.boot_server`` atomic, on a 2 s polling grid)
joined with nova's own (compute's ``instance.create.end`` notification), per boot.

    notes = notifications(log_paths, since=t0)      # uuid -> {"end": epoch s, "error": ..., "host"}
    rows = boots(records_by_site, boot_lines, notes) # one dict per boot (boots.parquet)
    s = summarize(rows)                              # summary.json: success %, percentiles, faults

All processes share one clock (one host), so nova's timestamps (UTC, microseconds) and the
driver's send times compare directly: ``nova_boot_s`` = create.end − POST sent.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

EVENTS = ("instance.create.end", "instance.create.error", "instance.create.start")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
QUANTILES = (("min", 0.0), ("median", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))


def _epoch(ts: str) -> float | None:
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(ts.rstrip("Z").split("+")[0], fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    return None


def _notification(line: str) -> dict[str, Any] | None:
    """The versioned notification a log line carries (oslo.messaging's log driver), or None."""
    i = line.find("{")
    if i < 0:
        return None
    try:
        msg = json.loads(line[i:])
    except ValueError:
        return None
    if isinstance(msg, dict) and isinstance(msg.get("message"), str):  # oslo.log use_json: a record
        text = msg["message"]
        j = text.find("{")
        try:
            msg = json.loads(text[j:]) if j >= 0 else None
        except ValueError:
            return None
    if isinstance(msg, dict) and "message" in msg and isinstance(msg["message"], dict):
        msg = msg["message"]
    return msg if isinstance(msg, dict) and msg.get("event_type") in EVENTS else None


def notifications(paths: Iterable[Path], since: float = 0.0) -> dict[str, dict[str, object]]:
    """uuid -> {"start", "end" (epoch s), "error" (the exception message), "host"} from the
    ``instance.create.*`` notifications in ``paths`` (events before ``since`` ignored)."""
    out: dict[str, dict[str, object]] = {}
    for p in paths:
        try:
            fh = p.open(errors="replace")
        except OSError:
            continue
        with fh:
            for line in fh:
                if "instance.create." not in line:
                    continue
                msg = _notification(line)
                if msg is None:
                    continue
                t = _epoch(str(msg.get("timestamp", "")))
                data = ((msg.get("payload") or {}).get("nova_object.data") or {})
                uuid = data.get("uuid")
                if t is None or t < since or not uuid:
                    continue
                rec = out.setdefault(str(uuid), {})
                kind = str(msg["event_type"]).rsplit(".", 1)[1]
                rec[kind] = t
                rec["host"] = data.get("host") or data.get("node")
                if kind == "error":
                    fault = (data.get("fault") or {}).get("nova_object.data") or {}
                    rec["fault"] = f"{fault.get('exception', '')}: {fault.get('exception_message', '')}"
    return out


def read_boot_lines(paths: Iterable[Path]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for p in paths:
        site = int(p.stem.rsplit("-", 1)[-1])
        for line in p.read_text().splitlines():
            if line.strip():
                out.append({"driver": site, **json.loads(line)})
    return out


def error_class(message: str | None) -> str | None:
    """A fault message without ids and numbers (a template to count by)."""
    if not message:
        return None
    m = UUID.sub("<uuid>", message)
    m = re.sub(r"\b\d+(\.\d+)?\b", "<n>", m)
    return m[:200]


def boots(iterations: Sequence[Mapping[str, Any]], lines: Sequence[Mapping[str, Any]],
          notes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per boot: the driver's record joined with its iteration (by driver site and
    index: Rally's ``nova.boot_server`` duration, the error) and nova's notifications."""
    by_it = {(int(r["site"]), int(r["index"])): r for r in iterations}
    rows = []
    for b in lines:
        it = by_it.get((int(b["driver"]), int(b["index"])), {})
        boot = next((a for a in it.get("atomic_actions", []) if a.get("name") == "nova.boot_server"), None)
        n = notes.get(str(b.get("id")), {})
        t_post = b.get("t_post")
        err = it.get("error") or []
        fault = b.get("fault") or n.get("fault") or (err[1] if len(err) > 1 else None)
        rows.append({
            "driver": b["driver"], "index": b["index"], "id": b.get("id"), "name": b.get("name"),
            "status": b.get("status") or ("failed" if err else "unknown"),
            "ok": b.get("status") == "ACTIVE" and not err,
            "rally_boot_s": ((boot["finished_at"] - boot["started_at"]) if boot and not boot.get("failed")
                             else None),
            "api_s": (b["t_accepted"] - t_post) if b.get("t_accepted") and t_post else None,
            "nova_boot_s": (n["end"] - t_post) if n.get("end") and t_post else None,
            "schedule_to_build_s": (n["start"] - t_post) if n.get("start") and t_post else None,
            "polls": b.get("polls"), "host": b.get("host") or n.get("host"), "fault": fault,
            "error_class": error_class(fault), "error_type": err[0] if err else None,
            "t_post": t_post, "request_id": b.get("request_id"), "trace_id": b.get("trace_id")})
    return rows


def _stats(xs: Sequence[float], prefix: str) -> dict[str, float | None]:
    a = np.asarray([x for x in xs if x is not None], dtype=float)
    out: dict[str, float | None]
    if not len(a):
        out = {f"{prefix}_{k}": None for k, _ in QUANTILES}
        out[f"{prefix}_mean"] = None
        return out
    out = {f"{prefix}_{k}": float(np.quantile(a, q)) for k, q in QUANTILES}
    out[f"{prefix}_mean"] = float(a.mean())
    return out


def summarize(rows: Sequence[Mapping[str, Any]], window_s: float | None = None) -> dict[str, Any]:
    n = len(rows)
    ok = [r for r in rows if r["ok"]]
    faults = Counter(r["error_class"] or r["error_type"] or "unknown" for r in rows if not r["ok"])
    out: dict[str, object] = {"boots": n, "active": len(ok), "failed": n - len(ok),
                           "success_pct": round(100.0 * len(ok) / n, 2) if n else None,
                           "faults": dict(faults.most_common()),
                           "nova_timestamps": sum(1 for r in ok if r["nova_boot_s"] is not None)}
    out |= _stats([r["rally_boot_s"] for r in ok], "rally")
    out |= _stats([r["nova_boot_s"] for r in ok], "nova")
    out |= _stats([r["api_s"] for r in rows if r["api_s"] is not None], "api")
    if window_s:
        out["window_s"] = round(window_s, 3)
        out["active_per_s"] = round(len(ok) / window_s, 4)
    return out
