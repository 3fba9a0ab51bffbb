"""Summary of revoke_exp.py outputs: phase means; 0 rows against N rows with a bootstrap
interval (phases resampled, then iterations)."""

import json
import sys

import numpy as np


def boot(groups: list[list[float]], rng: np.random.Generator) -> np.ndarray:
    out = []
    for _ in range(4000):
        picked = [groups[i] for i in rng.integers(0, len(groups), len(groups))]
        out.append(np.mean([np.mean(rng.choice(g, len(g))) for g in picked]))
    return np.array(out)


for f in sys.argv[1:]:
    with open(f) as fh:
        rows = json.loads(fh.read().strip().splitlines()[-1])
    print(f, [(r.get("tok", r["revocation_events"]), round(r["mean_s"], 4), round(r["warmup_mean_s"], 4))
              for r in rows])
    if len({r["revocation_events"] for r in rows}) < 2:
        continue
    a = [r["durations"] for r in rows if r["revocation_events"] == 0]
    b = [r["durations"] for r in rows if r["revocation_events"] > 0]
    rng = np.random.default_rng(1)
    d = boot(b, rng) - boot(a, rng)
    ma, mb = np.mean([np.mean(g) for g in a]), np.mean([np.mean(g) for g in b])
    print(f"  mean 0 rows {ma:.4f}  N rows {mb:.4f}  diff {mb - ma:+.4f} "
          f"[{np.quantile(d, .025):+.4f}, {np.quantile(d, .975):+.4f}]  rel {mb / ma - 1:+.1%}")
    print("  hit rates", sorted({round(r["cache_hit_rate"], 4) for r in rows}),
          "bp reads", sorted({r["buffer_pool_reads"] for r in rows}))
