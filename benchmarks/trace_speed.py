"""Speed of `juice trace` on DEBUG nova logs (not a test: it measures and prints).

    python benchmarks/trace_speed.py --run /tmp/nv/ex1/<run> --mb 1000 [--workers 2] [--keep DIR]

Makes ~``--mb`` MB of logs by replicating a real nova run's logs (``juice.trace.synth.replicate``:
copy k one day later, request ids prefixed per copy, so every copy traces like the original;
the run's scheduler at DEBUG dominates the volume, as in a real DEBUG deployment), then times
``juice.trace.tables.trace`` on them (parse + state machine + skew + tables), reports MB/s, the
boots and their states, the CPU seconds and the load average before/after. Results appended as
a JSON line to ``--out``. Generation is not timed (page cache warm: the file was just written).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from juice.trace.synth import replicate
from juice.trace.tables import trace

MB = 1024 * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="a nova run directory with logs/")
    ap.add_argument("--mb", type=float, default=1000.0, help="log volume to trace (MB)")
    ap.add_argument("--workers", type=int, default=None, help="parser processes (default: CPUs)")
    ap.add_argument("--keep", type=Path, default=None, help="generate into (and keep) this directory")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/trace_speed.jsonl"))
    a = ap.parse_args()
    size = sum(f.stat().st_size for f in (a.run / "logs").iterdir())
    copies = max(1, round(a.mb * MB / size))
    work = a.keep or Path(tempfile.mkdtemp(prefix="juice-trace-bench-"))
    try:
        t0 = time.monotonic()
        files = replicate(a.run, work, copies)
        total = sum(f.stat().st_size for f in files)
        gen_s = time.monotonic() - t0
        print(f"generated {total / MB:.0f} MB ({copies} copies of {size / MB:.1f} MB) in {gen_s:.1f} s")
        load0 = os.getloadavg()
        cpu0 = _cpu()
        t0 = time.monotonic()
        t = trace([work], workers=a.workers)
        wall = time.monotonic() - t0
        cpu = _cpu() - cpu0
        load1 = os.getloadavg()
        states = t.boots["state"].value_counts().to_dict()
        row = {"run": a.run.name, "mb": round(total / MB, 1), "copies": copies, "files": len(files),
               "workers": a.workers or os.cpu_count(), "wall_s": round(wall, 2),
               "mb_per_s": round(total / MB / wall, 1), "cpu_s": round(cpu, 2), "boots": len(t.boots),
               "states": states, "events": len(t.events),
               "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in load1],
               "when": time.strftime("%Y-%m-%d %H:%M:%S")}
        print(json.dumps(row))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        with a.out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


if __name__ == "__main__":
    main()
