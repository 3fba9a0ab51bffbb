"""Per-message table and summary from hand-made agent records: lost, duplicated, locality."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from juice.studies.messaging import metrics


def _write(path: Path, recs: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"k": "send", "id": "torn')
    return path


def test_counts_by_id(tmp_path: Path) -> None:
    t = 1000.0
    sends = []
    for i in range(6):
        sends.append({"k": "send", "id": f"c0:{i}", "cli": "c0", "site": 1, "topic": "a", "m": "cast",
                      "t_int": t + i, "t_send": t + i + 0.001, "t_done": t + i + 0.002, "ok": True})
    sends.append({"k": "send", "id": "c0:6", "cli": "c0", "site": 1, "topic": "a", "m": "cast",
                  "t_int": t + 6, "t_send": None, "t_done": None, "ok": False,
                  "err": "skipped: generator backlog full"})
    sends.append({"k": "send", "id": "f:0", "cli": "f", "site": 2, "topic": "fan", "m": "fanout",
                  "t_int": t + 1, "t_send": t + 1, "t_done": t + 1, "ok": True})
    recvs = [{"k": "recv", "id": f"c0:{i}", "srv": "s1" if i % 2 else "s2", "site": 1 if i % 2 else 2,
              "t": t + i + 0.01} for i in range(1, 6)]          # c0:0 never delivered
    recvs.append({"k": "recv", "id": "c0:3", "srv": "s1", "site": 1, "t": t + 3.02})  # a duplicate
    recvs.append({"k": "recv", "id": "c0:4", "srv": "s1", "site": 1, "t": t + 4.5})   # a 2nd server
    recvs += [{"k": "recv", "id": "f:0", "srv": s, "site": site, "t": t + 1.05}
              for s, site in (("s1", 1), ("s2", 2))]            # 2 of the 3 fanout consumers
    files = [_write(tmp_path / "c.jsonl", [*sends, {"k": "end", "pid": 1}]),
             _write(tmp_path / "s.jsonl", recvs)]
    s, r, ends = metrics.read_records(files)
    assert (len(s), len(r), len(ends)) == (len(sends), len(recvs), 1)
    m = metrics.messages(s, r, {"a": 1, "fan": 3}, warmup_until=t)
    by = m.set_index("id")
    assert by.loc["c0:0", "delivered"] == 0 and by.loc["c0:3", "dups"] == 1
    assert by.loc["c0:4", "delivered"] == 1 and by.loc["c0:4", "dups"] == 1
    assert bool(by.loc["c0:6", "skipped"]) and by.loc["f:0", "expected"] == 3
    summ = metrics.summarize(m, r, window_s=6.0)
    assert summ["skipped"] == 1 and summ["sent"] == 7
    assert summ["lost"] == 1 + 1            # c0:0, and the missing fanout consumer
    assert summ["duplicates"] == 2
    assert summ["expected_deliveries"] == 6 + 3 and summ["delivered"] == 5 + 2
    local = sum(1 for x in recvs if x["id"] != "c0:3" or x["t"] != t + 3.02
                if (x["site"] == 1 and x["id"].startswith("c0")) or (x["site"] == 2 and x["id"] == "f:0"))
    assert summ["locality_pct"] == round(100.0 * (local + 1) / 7, 2)  # + the duplicate in site 1
    assert summ["oneway_p50_ms"] is not None and summ["rtt_p50_ms"] is None   # casts only
    tl = metrics.timeline(m)
    assert int(tl["sent"].sum()) == len(sends) and int(tl["lost"].sum()) == summ["lost"]


def test_empty_run_has_no_rates(tmp_path: Path) -> None:
    s, r, _ = metrics.read_records([tmp_path / "missing.jsonl"])
    m = metrics.messages(s, r, {}, warmup_until=0.0)
    summ = metrics.summarize(m, r, window_s=1.0)
    assert summ["sent"] == 0 and summ["locality_pct"] is None and isinstance(m, pd.DataFrame)
