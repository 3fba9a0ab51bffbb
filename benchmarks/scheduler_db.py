"""Run the scheduler–database study (default: examples/scheduler-db.yaml) and print its
figures: median read time per N per configuration, fits and crossings, achieved update
rates, the cache read at the largest N. Resumable: rerunning skips complete points.

    /var/cache/juice/venv/bin/python benchmarks/scheduler_db.py [spec.yaml] [--out DIR] [--html F]

Last figures: benchmarks/scheduler_db.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import yaml

from juice.studies.schedulerdb import STUDY, report, spec
from juice.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?", default=str(ROOT / "examples" / "scheduler-db.yaml"))
    ap.add_argument("--out", default="/var/tmp/juice-results")
    ap.add_argument("--html", default=None, help="also write the report section to this file")
    ap.add_argument("--no-run", action="store_true", help="only print figures of stored runs")
    args = ap.parse_args()
    path = Path(args.spec)
    s = spec.parse(yaml.safe_load(path.read_text()), str(path))
    t0 = time.monotonic()
    root = Path(args.out) / s.name
    if not args.no_run:
        sweep.run(STUDY, s, yaml.safe_load(path.read_text()), path.read_text(), root,
                  lambda m: print(f"[{time.monotonic() - t0:7.1f}] {m}", flush=True))
        print(f"study time: {time.monotonic() - t0:.0f} s")
    reads, upd, _ = report.load([root])
    ok = reads[reads["ok"]]
    table = (ok.groupby(["backend", "track", "schedulers", "updates", "nodes"])["seconds"]
             .agg(["median", "min", "max", "count"]).round(3))
    with pd.option_context("display.max_rows", 500, "display.width", 160):
        print(table)
        if not upd.empty:
            u = upd[upd["target_rate"] > 0][["backend", "track", "schedulers", "nodes", "target_rate",
                                             "achieved_rate", "count"]]
            print(u.sort_values(["backend", "track", "schedulers", "nodes"]).round(2).to_string(index=False))
    print("\n".join(report.summary_lines(report.summary([root]))))
    if args.html:
        Path(args.html).write_text("<!doctype html><meta charset=utf-8><body>"
                                   + (report.section([root]) or "") + "</body>")
        print(f"report section: {args.html}")


if __name__ == "__main__":
    main()
