"""Summarise first_run.py logs: per mode (cold / prewarm), the first run's penalty on a fresh
deployment (run 0's mean − the mean of the later runs of the same deployment) with a 95 %
bootstrap interval over deployments, the first measured iterations (3 per driver round) against
the next ones, and where each worker's first full garbage collection fell.

    python benchmarks/order_cause/first_run_sum.py fr.log [more.log ...]
"""

import json
import random
import statistics
import sys
from collections import defaultdict


def boot(xs: list[float], n: int = 4000, seed: int = 1) -> tuple[float, float]:
    rng = random.Random(seed)
    ms = sorted(statistics.mean(rng.choices(xs, k=len(xs))) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n) - 1]


rows = []
for path in sys.argv[1:]:
    with open(path) as f:
        rows += [json.loads(line[4:]) for line in f if line.startswith("run ")]
deps: dict[tuple[str, int, str], list[dict]] = defaultdict(list)
for i, r in enumerate(rows):
    # a deployment = consecutive rows whose step does not go back to 0
    if r["step"] == 0 or not deps:
        key = (r.get("mode", "?"), i, r["plan"])
    deps[key].append(r)

by_mode: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
for (mode, _, _), rs in deps.items():
    if len(rs) < 2:
        continue
    first, later = rs[0], rs[1:]
    m = by_mode[mode]
    m["penalty_s"].append(first["mean_s"] - statistics.mean(x["mean_s"] for x in later))
    m["first_s"].append(first["mean_s"])
    m["later_s"].append(statistics.mean(x["mean_s"] for x in later))
    meas = [it["d"] for it in first["its"] if not it["w"]]
    m["first3_minus_next3_s"].append(statistics.mean(meas[:3]) - statistics.mean(meas[3:6]))
    m["load1"].append(first["load1"])

for mode, m in sorted(by_mode.items()):
    n = len(m["penalty_s"])
    print(f"## {mode}: {n} fresh deployments, load average {min(m['load1']):.2f}-{max(m['load1']):.2f}")
    for k in ("first_s", "later_s", "penalty_s", "first3_minus_next3_s"):
        lo, hi = boot(m[k])
        print(f"  {k:22s} mean {statistics.mean(m[k]):+.4f} s  95 % [{lo:+.4f}, {hi:+.4f}]  "
              f"median {statistics.median(m[k]):+.4f}")
    rel = [p / later for p, later in zip(m["penalty_s"], m["later_s"], strict=True)]
    lo, hi = boot(rel)
    print(f"  first run vs later     {100 * statistics.mean(rel):+.1f} %  "
          f"95 % [{100 * lo:+.1f}, {100 * hi:+.1f}]")
