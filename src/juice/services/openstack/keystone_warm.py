"""A fresh Keystone worker's one-time garbage-collection pause, and the pre-warm that moves it
out of every measurement window (issue 27; docs/run-order.md, "The cause of the order effect").

Measured (benchmarks/order_cause/first_run.py): a gunicorn worker that has just imported
Keystone holds ~212,000 Python objects that CPython's cyclic collector has not yet counted as
long-lived. About 100 requests later (7 iterations of authenticate_user_and_validate_token) the
collector runs its first FULL collection over all of them: one stop-the-world pause of
~110-220 ms. With the quickstart's warm-up of 6 iterations it fell on the first measured
iterations of the first run of every deployment; after it, full collections are rare (none in
the next 100 iterations), so only a deployment's first run paid it.

What this module adds to the worker (through the WSGI shim) and to the deployment:

- ``juice.onhost.gc_probe``: a ``gc.callbacks`` hook that logs each full collection
  (``juice-gc pid=... gen=2 ms=...``) into the site's Keystone log. It changes nothing the collector does; its
  cost is one Python call per collection.
- ``prewarm``: right after the deployment answers, requests that need no password hash
  (re-scoped tokens, token validation, listings) go to every Keystone server until each of its
  workers has logged its first full collection — bounded by requests and time, and recorded
  (``facts()["prewarm"]``). A worker restarted later (a fault) is cold again, as a real one is.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from juice import onhost
from juice.lab.place import Place

# the lines of juice.onhost.gc_probe (in the site's Keystone log)
LINE = re.compile(rb"juice-gc pid=(\d+) gen=2 collected=\d+ ms=([0-9.]+)")

# One batch of requests against one Keystone server (argv: its /v3 URL, requests, threads; the
# admin in OS_USERNAME/OS_PASSWORD/OS_PROJECT_NAME): juice.onhost.keystone_api's prewarm, which
# prints {"requests": n, "errors": n}.
PREWARM_PY = onhost.source("keystone_api")

BATCH = 20          # requests per batch (~0.5 s on one idle worker here)
MAX_BATCHES = 80    # at most 1,600 requests per server
MAX_S = 60.0        # and at most ~60 s per server (a Keystone whose database is across a WAN
                    # answers in seconds: there the pause is small beside a request, and waiting
                    # for it would cost minutes)


@dataclass
class SiteWarm:
    """What the pre-warm did at one Keystone server (recorded in the manifest)."""

    site: int
    workers: list[int]
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    first_full_gc_ms: dict[str, float] = field(default_factory=dict)  # worker pid -> its pause
    done: bool = False  # every worker had its first full collection
    error: str = ""     # why a batch failed (the last line it printed), when one did

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def full_collections(log: bytes) -> dict[int, list[float]]:
    """Worker pid -> the durations (ms) of its full collections, in order, from a Keystone log."""
    out: dict[int, list[float]] = {}
    for m in LINE.finditer(log):
        out.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return out


def prewarm(place: Place, url: str, log: Path, workers: list[int], env: dict[str, str],
            python: str) -> SiteWarm:
    """Requests to the Keystone at ``url`` (``place``'s site) until each of ``workers`` logged a
    full collection in ``log``, bounded (``MAX_BATCHES``, ``MAX_S``: a batch still running then
    is cut). Never raises for a slow
    or failing server: what happened is in the result (``done``, ``errors``)."""
    w = SiteWarm(site=place.site, workers=sorted(workers))
    t0 = time.monotonic()
    threads = max(2, 2 * len(workers))  # several workers: concurrent requests reach each one
    for _ in range(MAX_BATCHES):
        seen = full_collections(place.read(log, max_bytes=16 << 20) or b"")
        w.first_full_gc_ms = {str(p): seen[p][0] for p in w.workers if p in seen}
        if len(w.first_full_gc_ms) == len(w.workers) or time.monotonic() - t0 > MAX_S:
            break
        left = max(5.0, MAX_S - (time.monotonic() - t0))
        r = place.run([python, "-c", PREWARM_PY, "prewarm", url, str(BATCH), str(threads)],
                      timeout=left, env=env)
        try:
            got = json.loads(r.out.strip().splitlines()[-1]) if r.ok else {}
        except (ValueError, IndexError):
            got = {}
        w.requests += int(got.get("requests", 0))
        w.errors += int(got.get("errors", 0)) if got else BATCH
        if not got:  # the server refuses: more requests will not warm it
            lines = (r.err or r.out).strip().splitlines()
            w.error = (f"a batch of {BATCH} requests did not end within {left:.0f} s" if r.rc is None
                       else lines[-1][:300] if lines else f"exit code {r.rc}")
            break
    w.done = len(w.first_full_gc_ms) == len(w.workers)
    w.seconds = round(time.monotonic() - t0, 2)
    return w
