"""Report at scale: 1M iterations (100 runs × 10k iterations × 2 atomic actions = 2M rows).

Synthesises run directories (manifest.json + actions.parquet, as ``juice.results.tidy``
writes them) for a seed-like matrix: 2 scenarios × 5 databases × 5 (sites, delay) points ×
2 repetitions, ~1% failed iterations, gamma-distributed action times. Then times
``juice report`` end to end in a fresh process (imports, load, analyses, figures, HTML),
and the phases in-process; and how fast ``iterations.jsonl`` becomes parquet.

    /var/cache/juice/venv/bin/python benchmarks/report_scale.py [--runs 100] [--iterations 10000]

Target: the end-to-end report in <= 15 s. Last figures: benchmarks/README.md, "Report at scale".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]

from juice.results import tidy

SCENARIOS = ("KeystoneBasic.authenticate_user_and_validate_token",
             "KeystoneBasic.create_user_update_password")
OPS = {SCENARIOS[0]: ("keystone_v3.fetch_token", "keystone_v3.validate_token"),
       SCENARIOS[1]: ("keystone_v3.create_user", "keystone_v3.update_user")}
RDBMS = ("mariadb", "galera", "cockroachdb", "postgres", "postgres-readlocal")
POINTS = ((3, 0.0), (9, 0.0), (45, 0.0), (9, 50.0), (9, 150.0))


def params_matrix(runs: int) -> list[dict[str, Any]]:
    out = []
    rep = 0
    while len(out) < runs:
        for scen in SCENARIOS:
            for db in RDBMS:
                for sites, delay in POINTS:
                    out.append({"study": "bench", "workload": "keystone", "scenario": scen, "rdbms": db,
                                "sites": sites, "delay_ms": delay, "zones": None, "load": "light",
                                "cache": True, "times": 0, "concurrency": 2, "rate": None,
                                "repetition": rep, "seed": rep, "run_id": f"{len(out)}"})
        rep += 1
    return out[:runs]


def synth_run(root: Path, name: str, params: dict[str, Any], n: int, rng: np.random.Generator) -> None:
    """One run directory with ``n`` iterations of two actions, written column-wise."""
    d = root / name
    d.mkdir(parents=True)
    ops = OPS[params["scenario"]]
    scale = 0.01 * (1 + params["delay_ms"] / 25) * (1 + params["sites"] / 45)
    dur = rng.gamma(4.0, scale / 4.0, size=(n, 2))
    failed = rng.random(n) < 0.01
    t0 = 1.7e9 + np.cumsum(dur.sum(axis=1) + 0.001) - dur.sum(axis=1)
    rows = 2 * n
    it = np.repeat(np.arange(n, dtype=np.int64), 2)
    seq = np.tile(np.array([0, 1], dtype=np.int32), n)
    start = np.column_stack([t0, t0 + dur[:, 0]]).ravel()
    fail_rows = np.repeat(failed, 2)
    act_failed = fail_rows & (seq == 1)
    arrays: dict[str, Any] = {}
    for k, v in params.items():
        a = pa.array([v] * rows)
        arrays[k] = a.dictionary_encode() if pa.types.is_string(a.type) else a
    op_idx = pa.array(seq, type=pa.int32())
    err = pa.DictionaryArray.from_arrays(pa.array(np.where(fail_rows, 0, -1), type=pa.int32(),
                                                  mask=~fail_rows), pa.array(["ConflictError"]))
    msg = pa.DictionaryArray.from_arrays(pa.array(np.where(fail_rows, 0, -1), type=pa.int32(),
                                                  mask=~fail_rows), pa.array(["409 Conflict"]))
    null_dict = pa.DictionaryArray.from_arrays(pa.nulls(rows, type=pa.int32()), pa.array([], pa.string()))
    arrays.update({
        "run": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array([name])),
        "site": pa.array(np.ones(rows, np.int32)), "iteration": pa.array(it), "seq": pa.array(seq),
        "operation": pa.DictionaryArray.from_arrays(op_idx, pa.array(list(ops))),
        "parent": null_dict, "depth": pa.array(np.zeros(rows, np.int16)),
        "started_at": pa.array(start), "duration_s": pa.array(dur.ravel()),
        "action_failed": pa.array(act_failed), "iteration_failed": pa.array(fail_rows),
        "error_type": err, "error_message": msg, "timestamp": pa.array(np.repeat(t0, 2)),
        "iteration_duration_s": pa.array(np.repeat(dur.sum(axis=1) + 0.0005, 2)),
        "latency_s": pa.nulls(rows, pa.float64()), "dispatch_lag_s": pa.nulls(rows, pa.float64()),
    })
    table = pa.table(arrays).replace_schema_metadata({"juice_tidy_version": tidy.TIDY_VERSION,
                                                      "juice_params": json.dumps(params)})
    (d / "manifest.json").write_text(json.dumps({
        "version": 1, "run": name, "juice": "bench", "params": params,
        "rwratio": {"reads": 900, "writes": 100, "pct_reads": 90.0, "pct_writes": 10.0},
        "host": {"hostname": "bench"}}))
    tidy.write_parquet_atomic(table, d / tidy.TABLE_NAME)


def jsonl_build_rate(root: Path, n: int) -> float:
    """Seconds to turn one run's ``n``-iteration iterations.jsonl into parquet."""
    d = root / "jsonl-run"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({"params": params_matrix(1)[0]}))
    with (d / "iterations.jsonl").open("w") as f:
        for i in range(n):
            t = 1.7e9 + i
            f.write(json.dumps({"index": i, "site": 1, "timestamp": t, "duration": 0.03, "error": [],
                                "atomic_actions": [
                                    {"name": "a", "started_at": t, "finished_at": t + 0.01, "failed": False,
                                     "children": []},
                                    {"name": "b", "started_at": t + 0.01, "finished_at": t + 0.03,
                                     "failed": False, "children": []}]}) + "\n")
    t0 = time.perf_counter()
    tidy.build_run_table(d)
    return time.perf_counter() - t0


def phases(root: Path, out: Path) -> dict[str, float]:
    """In-process timings of the report's steps."""
    from juice.analysis.describe import describe
    from juice.analysis.stats import iteration_totals
    from juice.studies import report as render

    t: dict[str, float] = {}
    s = time.perf_counter()
    df = tidy.load([root])
    t["load (parquet -> DataFrame)"] = time.perf_counter() - s
    s = time.perf_counter()
    iteration_totals(df)
    t["per-iteration totals"] = time.perf_counter() - s
    s = time.perf_counter()
    describe(df, by=["scenario", "rdbms", "sites", "delay_ms"])
    t["describe (by scenario, rdbms, sites, delay)"] = time.perf_counter() - s
    s = time.perf_counter()
    render([root], out)
    t["render (all of it, in-process)"] = time.perf_counter() - s
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true", help="keep the synthetic results directory")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="juice-report-bench-"))
    try:
        rng = np.random.default_rng(0)
        s = time.perf_counter()
        for i, p in enumerate(params_matrix(args.runs)):
            synth_run(root / "results", f"run-{i:03d}", p, args.iterations, rng)
        print(f"synthesised {args.runs} runs x {args.iterations} iterations "
              f"({2 * args.runs * args.iterations:,} rows) in {time.perf_counter() - s:.1f} s")
        out = root / "report.html"
        code = ("import sys, typer; from juice.cli import analyze as cli_analyze; app = typer.Typer(); "
                "app.command('x', hidden=True)(lambda: None); cli_analyze.register(app); "
                "app(sys.argv[1:])")
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        s = time.perf_counter()
        cp = subprocess.run([sys.executable, "-c", code, "report", str(root / "results"), "-o", str(out)],
                            capture_output=True, text=True, timeout=600, check=False)
        e2e = time.perf_counter() - s
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if cp.returncode != 0:
            raise SystemExit(f"juice report failed: {cp.stderr.strip()}")
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"juice report end to end: {e2e:.1f} s wall, {cpu:.1f} s CPU (target <= 15 s; "
              f"load average {load} on {os.cpu_count()} cores); "
              f"{out.stat().st_size / 1e6:.1f} MB HTML, {out.read_text().count('<img')} figures")
        for k, v in phases(root / "results", root / "report2.html").items():
            print(f"  {k}: {v:.2f} s")
        rate = jsonl_build_rate(root, 10_000)
        print(f"iterations.jsonl -> actions.parquet: {rate:.2f} s per 10k iterations (2 actions each)")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
