"""OSProfiler's own cost on nova's boot time (issue 26; not a test: it measures, it asserts nothing).

    python benchmarks/osprofiler_cost.py [--pairs 5] [--times 50] [--concurrency 5] [--nodes 20]

Runs the same nova study spec with ``profiler: off`` and ``profiler: redis``, alternately
(off, on, then on, off, … so neither always runs first on a warmer machine), each a separate
``juice run``: a fresh lab and a fresh nova stack every time. Per run: nova's own boot time
(POST → ``instance.create.end``: ``nova_boot_s``) and Rally's polled one (``rally_boot_s``),
their medians and p95, and the 1-minute load average before the run (other work on this
shared machine slows both modes alike only if it lasts: re-run when it is high). At the end
the medians per mode over all boots, their difference, and a 95 % bootstrap interval of the
difference of medians (boots resampled within runs, runs within mode: the two-level bootstrap
of ``juice.analysis.bootstrap``). JSON goes to benchmarks/results/osprofiler_cost-<time>.json;
the runs stay under ``--results`` (default: a temporary directory, removed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from juice.analysis.bootstrap import group_rng, interval, replicates
from juice.util import atomic

OUT = Path(__file__).parent / "results"
MODES = ("off", "redis")


def spec(tmp: Path, name: str, mode: str, a: argparse.Namespace) -> Path:
    data: dict[str, Any] = {
        "workload": "nova", "name": name, "results": str(tmp / "results" / name), "sites": 2,
        "computes": {"processes": 1, "nodes_per_process": a.nodes},
        "scenarios": ["boot_server"], "runner": {"times": a.times, "concurrency": [a.concurrency]},
        "users": {"tenants": 1, "users_per_tenant": 2}, "poll_interval_s": 0.5, "profiler": mode}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def one_run(tmp: Path, k: int, mode: str, a: argparse.Namespace) -> dict[str, Any]:
    name = f"osp{k:02d}{'on' if mode != 'off' else 'off'}"
    load = os.getloadavg()
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, "-c", "from juice.cli import main; main()", "run",
                         str(spec(tmp, name, mode, a)), "--no-report"], capture_output=True, text=True,
                        timeout=a.timeout, check=False)
    wall = time.monotonic() - t0
    if cp.returncode != 0:
        raise SystemExit(f"run {name} failed ({cp.returncode}): {cp.stderr.strip().splitlines()[-3:]}")
    runs = [d for d in (tmp / "results" / name).iterdir() if d.is_dir() and not d.name.startswith(".")]
    b = pd.read_parquet(runs[0] / "boots.parquet")
    ok = b[b["ok"]]
    traced = None
    if (runs[0] / "osprofiler.json").is_file():
        doc = json.loads((runs[0] / "osprofiler.json").read_text())
        traced = sum(1 for v in doc["traces"].values() if v)
    row = {"run": k, "mode": mode, "boots": len(b), "active": len(ok), "osprofiler_traced": traced,
           "nova_median_s": float(ok["nova_boot_s"].median()),
           "nova_p95_s": float(ok["nova_boot_s"].quantile(0.95)),
           "rally_median_s": float(ok["rally_boot_s"].median()), "load_1min": round(load[0], 2),
           "wall_s": round(wall, 1), "nova_boot_s": [float(x) for x in ok["nova_boot_s"]]}
    print(f"run {k:2d} {mode:5s}: {row['active']}/{row['boots']} ACTIVE, "
          f"nova median {row['nova_median_s']:.3f} s, "
          f"p95 {row['nova_p95_s']:.3f} s, Rally median {row['rally_median_s']:.3f} s, "
          f"load {load[0]:.2f}, {wall:.0f} s", flush=True)
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    reps = {}
    for m in MODES:
        mine = [r for r in rows if r["mode"] == m]
        v = np.concatenate([np.asarray(r["nova_boot_s"], dtype=float) for r in mine])
        runs = np.concatenate([np.full(len(r["nova_boot_s"]), i) for i, r in enumerate(mine)])
        reps[m] = replicates(v, None, runs, (0.5,), group_rng("osprofiler_cost", m)).quantiles[0]
        per[m] = {"runs": len(mine), "boots": int(len(v)), "nova_median_s": float(np.median(v))}
    diff = per["redis"]["nova_median_s"] - per["off"]["nova_median_s"]
    lo, hi = interval(reps["redis"] - reps["off"])
    return {**per, "diff_median_s": diff, "diff_lo_s": lo, "diff_hi_s": hi,
            "diff_pct": 100.0 * diff / per["off"]["nova_median_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5, help="on/off pairs (each a fresh stack)")
    ap.add_argument("--times", type=int, default=50, help="boots per run")
    ap.add_argument("--concurrency", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=20, help="simulated nodes (one nova-compute)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="one run's bound, s")
    ap.add_argument("--results", type=Path, default=None, help="keep the runs here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = a.results or Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        rows = []
        for k in range(a.pairs):
            order = MODES if k % 2 == 0 else MODES[::-1]
            for m in order:
                rows.append(one_run(tmp, 2 * k + order.index(m), m, a))
    s = summary(rows)
    print(f"profiler off: {s['off']['boots']} boots, nova median {s['off']['nova_median_s']:.3f} s; "
          f"on (redis): {s['redis']['boots']} boots, {s['redis']['nova_median_s']:.3f} s; "
          f"difference {1000 * s['diff_median_s']:+.1f} ms ({s['diff_pct']:+.1f} %), "
          f"95% interval [{1000 * s['diff_lo_s']:+.1f}, {1000 * s['diff_hi_s']:+.1f}] ms")
    OUT.mkdir(exist_ok=True)
    out = OUT / f"osprofiler_cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    atomic.write_json(out, {"args": {k: str(v) for k, v in vars(a).items()}, "runs": rows, "summary": s})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
