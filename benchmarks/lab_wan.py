"""Benchmarks of the lab's emulated WAN (not tests: they measure, they do not assert).

    python benchmarks/lab_wan.py accuracy  [--sites 3] [--delays 0,5,50,150] [--probes 100]
    python benchmarks/lab_wan.py zones     [--sites 9] [--intra 10] [--inter 75]
    python benchmarks/lab_wan.py capacity  [--delay 50] [--rates 20000,40000,60000] [--seconds 5]
    python benchmarks/lab_wan.py jitter    [--delay 50] [--jitter 5] [--probes 400]
    python benchmarks/lab_wan.py bringup   [--sites 9] [--repeat 3]
    python benchmarks/lab_wan.py all

Each prints a table and writes JSON under benchmarks/results/ (git-ignored). Every lab is
ephemeral and removed at the end. Record the figures in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from juice.lab import LocalLab, spec
from juice.lab.check import check
from juice.util import atomic

OUT = Path(__file__).parent / "results"


def _lab(name: str, **kw: Any) -> LocalLab:
    return LocalLab.up(spec.parse({"name": name, **kw}), ephemeral=True, replace=True)


def accuracy(sites: int, delays: list[float], probes: int) -> list[dict[str, Any]]:
    rows = []
    for d in delays:
        with _lab("bacc", sites=sites, delay_ms=d) as lab:
            rep = check(lab, probes=probes, interval_s=0.01)
        meds = [p.median_rtt_ms or float("nan") for p in rep.pairs]
        row = {"sites": sites, "delay_ms_one_way": d, "expected_rtt_ms": 2 * d,
               "median_rtt_ms_worst_pair": max(meds, key=lambda m: abs(m - 2 * d)),
               "error_ms_worst_pair": round(max(abs(m - 2 * d) for m in meds), 3),
               "p99_rtt_ms_max": max(p.p99_rtt_ms or 0 for p in rep.pairs),
               "tolerance_ms": rep.pairs[0].tolerance_ms, "pass": rep.ok, "probes": probes,
               "backend": rep.backend}
        rows.append(row)
        print(f"delay {d:>6g} ms one-way: expected RTT {2 * d:g} ms, worst pair median "
              f"{row['median_rtt_ms_worst_pair']} ms (error {row['error_ms_worst_pair']} ms, "
              f"tolerance {row['tolerance_ms']}) -> {'pass' if rep.ok else 'FAIL'}")
    return rows


def zones(sites: int, intra: float, inter: float, probes: int) -> dict[str, Any]:
    z = spec.even_zones(sites, 3)
    with _lab("bzone", sites=sites, zones=z, intra_zone_delay_ms=intra,
              inter_zone_delay_ms=inter) as lab:
        rep = check(lab, probes=probes)
    bad = [p for p in rep.pairs if not p.ok]
    print(f"{sites} sites, 3 zones, {intra:g}/{inter:g} ms one-way: "
          f"{len(rep.pairs) - len(bad)}/{len(rep.pairs)} pairs pass")
    return {"sites": sites, "intra_ms": intra, "inter_ms": inter, "pass": rep.ok,
            "pairs": [p.__dict__ for p in rep.pairs]}


def capacity(delay: float, rates: list[int], seconds: int, size: int) -> list[dict[str, Any]]:
    """UDP packets/s through one delayed pair (iperf3 site 1 -> site 2)."""
    rows = []
    with _lab("bcap", sites=2, delay_ms=delay) as lab:
        srv = lab.popen(2, ["iperf3", "-s", "-B", lab.site_ip(2), "-1"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            for rate in rates:
                if srv.poll() is not None:
                    srv = lab.popen(2, ["iperf3", "-s", "-B", lab.site_ip(2), "-1"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)
                before = lab.wan.stats() or {}
                bps = rate * size * 8
                cp = lab.run(1, ["iperf3", "-c", lab.site_ip(2), "-u", "-l", str(size), "-b",
                                 str(bps), "-t", str(seconds), "-J"], check=False,
                             timeout=seconds + 60)
                time.sleep(1.2)  # let the delayer write its stats
                after = lab.wan.stats() or {}
                try:
                    res = json.loads(cp.stdout)["end"]["sum"]
                except (KeyError, json.JSONDecodeError):
                    print(f"rate {rate}: iperf3 failed: {cp.stdout[-300:]} {cp.stderr[-300:]}")
                    continue
                tot_b, tot_a = before.get("totals", {}), after.get("totals", {})
                row = {"delay_ms_one_way": delay, "target_pps": rate, "packet_bytes": size,
                       "sent_packets": res.get("packets"), "lost_percent": res.get("lost_percent"),
                       "achieved_pps": round(res.get("packets", 0) / max(res.get("seconds", 1), 1e-9)),
                       "delayer_max_depth": tot_a.get("max_depth"),
                       "delayer_overflow_drops": tot_a.get("dropped_overflow", 0)
                       - tot_b.get("dropped_overflow", 0),
                       "delayer_kernel_drops": tot_a.get("dropped_kernel", 0)
                       - tot_b.get("dropped_kernel", 0)}
                rows.append(row)
                print(f"target {rate:>6} pps: sent {row['achieved_pps']} pps, lost "
                      f"{row['lost_percent']:.3f} %, delayer max depth {row['delayer_max_depth']}")
                srv.wait(timeout=10)
        finally:
            srv.kill()
            srv.wait()
    return rows


def jitter(delay: float, jit: float, probes: int) -> dict[str, Any]:
    with _lab("bjit", sites=2, delay_ms=delay, jitter_ms=jit) as lab:
        cp = lab.run(1, ["ping", "-n", "-c", str(probes), "-i", "0.01", "-W", "3",
                         lab.site_ip(2)], timeout=probes * 0.02 + 60)
    from juice.lab.check import parse_ping

    rtts = sorted(parse_ping(cp.stdout))
    p = lambda q: rtts[int(q * (len(rtts) - 1))]  # noqa: E731
    # Two independent normal one-way delays: RTT sd = sqrt(2) * jitter.
    row = {"delay_ms_one_way": delay, "jitter_ms_sd_one_way": jit, "probes": probes,
           "received": len(rtts), "rtt_p50_ms": p(0.5), "rtt_p99_ms": p(0.99),
           "rtt_sd_ms": round(statistics.pstdev(rtts), 3),
           "expected_rtt_sd_ms": round(jit * 2 ** 0.5, 3),
           "expected_rtt_p99_ms": round(2 * delay + 2.326 * jit * 2 ** 0.5, 3)}
    print(f"jitter {jit:g} ms sd one-way at {delay:g} ms: RTT p50 {row['rtt_p50_ms']} "
          f"p99 {row['rtt_p99_ms']} (normal model {row['expected_rtt_p99_ms']}), sd "
          f"{row['rtt_sd_ms']} (expected {row['expected_rtt_sd_ms']})")
    return row


def bringup(sites: int, repeat: int) -> dict[str, Any]:
    ups, downs = [], []
    for _ in range(repeat):
        t0 = time.monotonic()
        lab = _lab("bup", sites=sites, delay_ms=50)
        ups.append(time.monotonic() - t0)
        t0 = time.monotonic()
        lab.down()
        downs.append(time.monotonic() - t0)
    row = {"sites": sites, "up_s_median": round(statistics.median(ups), 3),
           "down_s_median": round(statistics.median(downs), 3), "repeat": repeat}
    print(f"{sites} sites: up {row['up_s_median']} s, down {row['down_s_median']} s (median of {repeat})")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["accuracy", "zones", "capacity", "jitter", "bringup", "all"])
    ap.add_argument("--sites", type=int, default=0)
    ap.add_argument("--delays", default="0,5,50,150")
    ap.add_argument("--delay", type=float, default=50)
    ap.add_argument("--jitter", type=float, default=5)
    ap.add_argument("--intra", type=float, default=10)
    ap.add_argument("--inter", type=float, default=75)
    ap.add_argument("--probes", type=int, default=100)
    ap.add_argument("--rates", default="10000,20000,40000,60000,80000")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--size", type=int, default=64, help="UDP payload bytes")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    res: dict[str, Any] = {"started_at": time.time(), "argv": sys.argv[1:]}
    todo = ["accuracy", "zones", "capacity", "jitter", "bringup"] if a.what == "all" else [a.what]
    for w in todo:
        if w == "accuracy":
            res["accuracy"] = [r for n in ([a.sites] if a.sites else [3, 9])
                               for r in accuracy(n, [float(x) for x in a.delays.split(",")], a.probes)]
        elif w == "zones":
            res["zones"] = zones(a.sites or 9, a.intra, a.inter, a.probes)
        elif w == "capacity":
            res["capacity"] = capacity(a.delay, [int(x) for x in a.rates.split(",")], a.seconds, a.size)
        elif w == "jitter":
            res["jitter"] = jitter(a.delay, a.jitter, max(a.probes, 400))
        elif w == "bringup":
            res["bringup"] = bringup(a.sites or 9, a.repeat)
    out = OUT / f"lab-{a.what}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    atomic.write_json(out, res)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
