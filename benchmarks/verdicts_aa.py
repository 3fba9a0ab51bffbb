"""Do Juice's verdicts hold? False-"real" rate over A/A pairs and detection rate of a small
effect, against the number of runs a side (issue 38; figures in benchmarks/verdicts.md).

    juice run benchmarks/verdicts/keystone.yaml --results R/keystone --no-report   # 40 runs
    juice run benchmarks/verdicts/nova.yaml --results R/nova --no-report           # 20 runs
    python benchmarks/verdicts_aa.py R/keystone R/nova [--effect delay_ms=3.0] [--out F.json]

Runs are grouped by configuration (``juice.compare.metadata.config_of``). For each
configuration with enough runs, A/A pairs are made of DISJOINT sets of its runs (k a side) —
every way of cutting a random order of the runs into such pairs, over ``--orders`` random
orders (pairs from one order are independent; pairs from different orders share runs) — and
each pair goes through ``juice compare``'s own code (``juice.compare.deltas.compare``): a pair
is a false "real" when ANY of its metrics × {mean, p95} is called real after Holm's correction
(the familywise error the user meets). With k = 1 the pair is judged against a calibration
measured on the configuration's OTHER runs (leave-pair-out), as `juice calibrate` would have
stored it. For comparison, the method Juice used before (each run's iterations resampled, one
run a side, percentile bootstrap of the difference of means) is applied to the same k = 1
pairs, ``iteration`` mean only.

Detection: with ``--effect FIELD=VALUE``, pairs of k runs of the configuration where FIELD
has VALUE against k runs of the one where it has its other value (the same other fields),
disjoint as above; the rate at which ``iteration`` mean is called real (and in the right
direction), against k.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from juice.analysis.bootstrap import group_rng, interval, replicates
from juice.compare.calibration import Store, config_key, measure
from juice.compare.deltas import compare
from juice.compare.metadata import config_of
from juice.results.samples import Unit, units

KS = (1, 2, 3, 5)


def _store(runs: Sequence[Unit]) -> Store:
    return Store(Path("/dev/null"), {"hostname": "bench"}, measure(runs, fresh=False, results="bench"))


def _pairs(runs: Sequence[Unit], k: int, orders: int, seed: int) -> list[tuple[list[Unit], list[Unit]]]:
    out = []
    for o in range(orders):
        rs = list(runs)
        random.Random(f"{seed}:{o}").shuffle(rs)
        for i in range(0, len(rs) - 2 * k + 1, 2 * k):
            out.append((rs[i:i + k], rs[i + k:i + 2 * k]))
    return out


def _old_real(a: Unit, b: Unit, key: Any) -> bool:
    va, vb = a.samples["iteration"], b.samples["iteration"]
    ra = replicates(va, None, None, (), group_rng("old", key, "a"))
    rb = replicates(vb, None, None, (), group_rng("old", key, "b"))
    lo, hi = interval(rb.mean - ra.mean)
    return bool(lo > 0 or hi < 0)


def aa(runs: Sequence[Unit], orders: int) -> list[dict[str, Any]]:
    rows = []
    for k in KS:
        if len(runs) < 2 * k + (2 if k == 1 else 0):
            continue
        pairs = _pairs(runs, k, orders, 38)
        first = len(runs) // (2 * k)  # the disjoint pairs of the first order
        any_real = it_real = old = 0
        any_first = 0
        for n, (a, b) in enumerate(pairs):
            cal = None
            if k == 1:
                cal = _store([u for u in runs if u is not a[0] and u is not b[0]])
                old += _old_real(a[0], b[0], n)
            ds = compare({"A": a, "B": b}, calibration=cal)
            hit = any(d.verdict == "real" for d in ds)
            any_real += hit
            any_first += hit if n < first else 0
            it_real += any(d.verdict == "real" for d in ds if (d.metric, d.stat) == ("iteration", "mean"))
        rows.append({"k": k, "pairs": len(pairs), "independent_pairs": first,
                     "false_real_any_metric": any_real / len(pairs),
                     "false_real_any_metric_independent": any_first / first,
                     "false_real_iteration_mean": it_real / len(pairs),
                     "tests_per_pair": len(ds),
                     "method": ds[0].method if ds else "",
                     **({"old_method_false_real_iteration_mean": old / len(pairs)} if k == 1 else {})})
    return rows


def detection(a_runs: Sequence[Unit], b_runs: Sequence[Unit], orders: int) -> list[dict[str, Any]]:
    mean_a = float(np.mean([u.samples["iteration"].mean() for u in a_runs]))
    mean_b = float(np.mean([u.samples["iteration"].mean() for u in b_runs]))
    up = mean_b > mean_a
    rows = []
    for k in KS:
        n_pairs = min(len(a_runs), len(b_runs)) // k
        if n_pairs < 1 or (k == 1 and min(len(a_runs), len(b_runs)) < 3):
            continue
        found = right = total = 0
        for o in range(orders):
            ra, rb = list(a_runs), list(b_runs)
            random.Random(f"det:{o}:a").shuffle(ra)
            random.Random(f"det:{o}:b").shuffle(rb)
            for i in range(n_pairs):
                a, b = ra[i * k:(i + 1) * k], rb[i * k:(i + 1) * k]
                cal = None
                if k == 1:  # calibrated on the other runs of the baseline configuration
                    cal = _store([u for u in a_runs if u is not a[0]])
                ds = compare({"A": a, "B": b}, calibration=cal)
                (d,) = [d for d in ds if (d.metric, d.stat) == ("iteration", "mean")]
                total += 1
                found += d.verdict == "real"
                right += d.verdict == "real" and (d.delta > 0) == up
        rows.append({"k": k, "pairs": total, "detected": found / total, "right_direction": right / total})
    return [{"effect": mean_b / mean_a - 1.0, "mean_a": mean_a, "mean_b": mean_b,
             "runs_a": len(a_runs), "runs_b": len(b_runs), "by_k": rows}]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--effect", default=None, help="FIELD=VALUE: the configuration with the effect")
    ap.add_argument("--orders", type=int, default=10, help="random orders cut into disjoint pairs")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    doc: dict[str, Any] = {"configurations": []}
    for root in a.results:
        found = units([root])
        groups: dict[str, tuple[dict[str, str], list[Unit]]] = {}
        for u in found:
            cfg = config_of(u)
            groups.setdefault(config_key(cfg), (cfg, []))[1].append(u)
        for cfg, runs in groups.values():
            entry: dict[str, Any] = {"results": str(root), "config": cfg, "runs": len(runs),
                                     "aa": aa(runs, a.orders)}
            doc["configurations"].append(entry)
            print(f"{root} {cfg} ({len(runs)} runs)")
            for r in entry["aa"]:
                old = (f"; the old iteration bootstrap: {r['old_method_false_real_iteration_mean']:.0%} "
                       "of the same pairs") if "old_method_false_real_iteration_mean" in r else ""
                print(f"  A/A, {r['k']} run(s) a side: {r['pairs']} pairs ({r['independent_pairs']} "
                      f"independent), false real (any of {r['tests_per_pair']} tests) "
                      f"{r['false_real_any_metric']:.1%} [independent: "
                      f"{r['false_real_any_metric_independent']:.1%}], iteration mean "
                      f"{r['false_real_iteration_mean']:.1%}{old}  ({r['method']})")
        if a.effect:
            field, value = a.effect.split("=", 1)
            by_cfg = list(groups.values())
            with_ = [(c, r) for c, r in by_cfg if c.get(field) == value]
            def rest(c: dict[str, str], f: str = field) -> dict[str, str]:
                return {k: v for k, v in c.items() if k != f}

            for c, rb in with_:
                others = [(c2, r2) for c2, r2 in by_cfg if c2.get(field) != value and rest(c2) == rest(c)]
                for _c2, ra in others:
                    det = detection(ra, rb, a.orders)
                    doc.setdefault("detection", []).extend(det)
                    d = det[0]
                    print(f"  effect {field}={value}: {d['effect']:+.1%} on iteration mean "
                          f"({d['mean_a']:.4g} -> {d['mean_b']:.4g} s)")
                    for r in d["by_k"]:
                        print(f"    {r['k']} run(s) a side: detected {r['detected']:.0%} of {r['pairs']} "
                              f"pairs (right direction {r['right_direction']:.0%})")
    if a.out:
        a.out.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
