"""Load engine figures (not tests): how precise and how cheap Juice's load generator is.

    /var/cache/juice/venv/bin/python benchmarks/load_engine.py all
    /var/cache/juice/venv/bin/python benchmarks/load_engine.py openloop --rate 1000 --duration 30
    /var/cache/juice/venv/bin/python benchmarks/load_engine.py closed --concurrency 450 --times 9000
    /var/cache/juice/venv/bin/python benchmarks/load_engine.py overhead --times 100000

- openloop: open loop at ``--rate`` req/s for ``--duration`` s against ``fast_endpoint`` (a
  minimal aiohttp server in a separate process on loopback): dispatch lag p50/p99/max,
  latency from the intended start, drops, achieved rate, client CPU. Goal: lag p99 <= 2 ms,
  no unreported drop (started + dropped == arrivals).
- closed: one process holding ``--concurrency`` concurrent iterations against the same
  endpoint: completes? errors, throughput, CPU per iteration.
- overhead: the engine's own CPU per iteration with a scenario that does nothing (one atomic
  action), closed loop at concurrency 1 and 100, and the open loop.

Everything runs on this host (loopback); results go to benchmarks/results/load_engine-*.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from juice.load.api import Context, DictEnv, Env, Iteration, LoadResult
from juice.load.runner import RunnerSpec, run_scenario

HERE = Path(__file__).resolve().parent


# ---- the endpoint ---------------------------------------------------------------------------
def fast_endpoint(port: int) -> None:
    """Serve ``GET /`` → 200 "ok" on 127.0.0.1:port until SIGTERM (runs in its own process)."""

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", ok)
    web.run_app(app, host="127.0.0.1", port=port, backlog=4096, print=None,
                access_log=None, handle_signals=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Endpoint:
    """``with Endpoint() as url:`` — fast_endpoint in a child process, stopped at exit."""

    def __enter__(self) -> str:
        self.port = _free_port()
        self.proc = subprocess.Popen([sys.executable, __file__, "serve", "--port", str(self.port)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return f"http://127.0.0.1:{self.port}/"
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("fast_endpoint did not start in 20 s")

    def __exit__(self, *_: object) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


# ---- scenarios --------------------------------------------------------------------------------
class HttpGet:
    """GET the endpoint once per iteration (one shared aiohttp session, unlimited pool)."""

    name = "Bench.http_get"

    def __init__(self, url: str) -> None:
        self.url = url
        self.session: aiohttp.ClientSession | None = None

    async def setup(self, env: Env) -> Context:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return {}

    async def run(self, it: Iteration) -> None:
        assert self.session is not None
        with it.atomic("http.get"):
            async with self.session.get(self.url) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}")

    async def cleanup(self, env: Env, ctx: Context) -> None:
        if self.session is not None:
            await self.session.close()


class Noop:
    name = "Bench.noop"

    async def setup(self, env: Env) -> Context:
        return {}

    async def run(self, it: Iteration) -> None:
        with it.atomic("noop"):
            pass

    async def cleanup(self, env: Env, ctx: Context) -> None:
        pass


# ---- measurements ---------------------------------------------------------------------------
def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def _ms(x: float) -> float:
    return round(x * 1e3, 3)


class GcPauses:
    """Every collection's generation and duration while the block runs (gc.callbacks)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._t0 = 0.0

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.pauses.append((int(info["generation"]), time.perf_counter() - self._t0))

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._cb)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._cb)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for gen in (0, 1, 2):
            d = [x for g, x in self.pauses if g == gen]
            out[f"gen{gen}"] = {"n": len(d), "max_ms": _ms(max(d)) if d else 0.0,
                                "total_ms": _ms(sum(d))}
        return out


def _run(scenario: Any, runner: RunnerSpec) -> LoadResult:
    return asyncio.run(run_scenario(scenario, DictEnv(1), runner))


def openloop(rate: float, duration: float, arrival: str, gc_mode: str,
             max_in_flight: int, url_less: bool = False) -> dict[str, Any]:
    with Endpoint() as url, GcPauses() as pauses:
        scenario: Any = Noop() if url_less else HttpGet(url)
        res = _run(scenario, RunnerSpec(type="open", rate=rate, times=None,
                                        duration_s=duration, arrival=arrival,
                                        max_in_flight=max_in_flight, timeout_s=10, gc=gc_mode))
    lags = [r.dispatch_lag for r in res.records if r.dispatch_lag is not None]
    lat = [r.latency for r in res.records if r.latency is not None]
    svc = [r.duration for r in res.records]
    arrivals = int(rate * duration)
    return {"bench": "openloop", "scenario": scenario.name, "rate": rate,
            "duration_s": duration, "arrival": arrival,
            "gc": gc_mode, "arrivals_due": arrivals, "started": len(res.records),
            "dropped": res.dropped.count,
            "unreported": arrivals - len(res.records) - res.dropped.count,
            "errors": res.failed_count, "achieved_rate": round(res.achieved_rate, 1),
            "lag_ms": {"p50": _ms(_pct(lags, 50)), "p90": _ms(_pct(lags, 90)),
                       "p99": _ms(_pct(lags, 99)), "p999": _ms(_pct(lags, 99.9)),
                       "max": _ms(max(lags))},
            "lag_over_2ms": sum(1 for x in lags if x > 0.002),
            "latency_ms": {"p50": _ms(_pct(lat, 50)), "p99": _ms(_pct(lat, 99)),
                           "max": _ms(max(lat))},
            "service_ms": {"p50": _ms(_pct(svc, 50)), "p99": _ms(_pct(svc, 99))},
            "client_cpu_s": round(res.cpu_s, 2),
            "client_cpu_us_per_it": round(res.cpu_s / max(1, len(res.records)) * 1e6, 1),
            "gc_pauses": pauses.summary()}


def closed(concurrency: int, times: int) -> dict[str, Any]:
    with Endpoint() as url:
        res = _run(HttpGet(url), RunnerSpec(times=times, concurrency=concurrency, timeout_s=60))
    svc = [r.duration for r in res.records]
    return {"bench": "closed", "concurrency": concurrency, "times": times,
            "completed": len(res.records), "errors": res.failed_count,
            "error_types": sorted({r.error[0] for r in res.records if r.error}),
            "window_s": round(res.load_duration, 2), "throughput": round(res.achieved_rate, 1),
            "service_ms": {"p50": _ms(_pct(svc, 50)), "p99": _ms(_pct(svc, 99))},
            "client_cpu_s": round(res.cpu_s, 2),
            "client_cpu_us_per_it": round(res.cpu_s / max(1, len(res.records)) * 1e6, 1)}


def overhead(times: int) -> dict[str, Any]:
    out: dict[str, Any] = {"bench": "overhead", "times": times}
    for conc in (1, 100):
        res = _run(Noop(), RunnerSpec(times=times, concurrency=conc))
        out[f"closed_c{conc}_cpu_us_per_it"] = round(res.cpu_s / times * 1e6, 2)
    res = _run(Noop(), RunnerSpec(type="open", rate=20000, times=times // 2, max_in_flight=100))
    out["open_20k_cpu_us_per_it"] = round(res.cpu_s / max(1, len(res.records)) * 1e6, 2)
    out["open_20k_achieved_rate"] = round(res.achieved_rate, 1)
    out["open_20k_dropped"] = res.dropped.count
    return out


def _host() -> dict[str, Any]:
    return {"loadavg": os.getloadavg(), "cpus": os.cpu_count(),
            "timer_slack_ns": Path("/proc/self/timerslack_ns").read_text().strip(),
            "python": sys.version.split()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["all", "openloop", "closed", "overhead", "serve"])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--arrival", default="constant", choices=["constant", "poisson"])
    ap.add_argument("--gc", default="freeze", choices=["on", "freeze", "off"])
    ap.add_argument("--max-in-flight", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=450)
    ap.add_argument("--times", type=int, default=0)
    ap.add_argument("--noop", action="store_true",
                    help="openloop: a scenario that sends nothing (the dispatcher alone)")
    a = ap.parse_args()
    if a.what == "serve":
        fast_endpoint(a.port)
        return
    figures: list[dict[str, Any]] = []
    host_before = _host()
    if a.what in ("all", "openloop"):
        figures.append(openloop(a.rate, a.duration, a.arrival, a.gc, a.max_in_flight, a.noop))
    if a.what in ("all", "closed"):
        figures.append(closed(a.concurrency, a.times or a.concurrency * 20))
    if a.what in ("all", "overhead"):
        figures.append(overhead(a.times or 100_000))
    out = {"host_before": host_before, "host_after": _host(), "figures": figures}
    print(json.dumps(out, indent=2))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (results / f"load_engine-{a.what}-{stamp}.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
