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

- ``GC_PROBE``: a ``gc.callbacks`` hook that logs each full collection (``juice-gc pid=...
  gen=2 ms=...``) into the site's Keystone log. It changes nothing the collector does; its
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

from juice.lab.place import Place

# Appended to the WSGI shim, after Keystone is imported.
GC_PROBE = """
import gc as _gc, os as _os, sys as _sys, time as _time
_gc_t0 = [0.0]
def _juice_gc(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        _gc_t0[0] = _time.perf_counter()
    else:
        print(f"juice-gc pid={_os.getpid()} gen=2 collected={info['collected']} "
              f"ms={1000 * (_time.perf_counter() - _gc_t0[0]):.1f}", file=_sys.stderr, flush=True)
_gc.callbacks.append(_juice_gc)
print(f"juice-gc pid={_os.getpid()} start objects={len(_gc.get_objects())}", file=_sys.stderr, flush=True)
"""

LINE = re.compile(rb"juice-gc pid=(\d+) gen=2 collected=\d+ ms=([0-9.]+)")

# One batch of requests against one Keystone server (argv: its /v3 URL, requests, threads; the
# admin in OS_USERNAME/OS_PASSWORD/OS_PROJECT_NAME). One password authentication per batch;
# then token re-scoping, validation and listings, none of which hashes a password. Prints
# {"requests": n, "errors": n}.
PREWARM_PY = """import json, os, sys, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor
base, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def call(method, path, body=None, token=None, subject=None):
    hdr = {"Content-Type": "application/json", **({"X-Auth-Token": token} if token else {}),
           **({"X-Subject-Token": subject} if subject else {})}
    req = urllib.request.Request(base + path, method=method, headers=hdr,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers
scope = {"project": {"name": os.environ["OS_PROJECT_NAME"], "domain": {"id": "default"}}}
st, h = call("POST", "/auth/tokens", {"auth": {"identity": {"methods": ["password"], "password": {"user": {
    "name": os.environ["OS_USERNAME"], "domain": {"id": "default"}, "password": os.environ["OS_PASSWORD"]}}},
    "scope": scope}})
if st != 201:
    sys.exit(f"keystone POST /auth/tokens: {st}")
admin = h["X-Subject-Token"]
def one(i):
    k = i % 4
    if k == 0:
        st, _ = call("POST", "/auth/tokens", {"auth": {"identity": {"methods": ["token"],
                     "token": {"id": admin}}, "scope": scope}})
        return st == 201
    if k == 1:
        return call("GET", "/auth/tokens", token=admin, subject=admin)[0] == 200
    return call("GET", "/projects" if k == 2 else "/users", token=admin)[0] == 200
with ThreadPoolExecutor(max_workers=threads) as ex:
    ok = list(ex.map(one, range(n)))
print(json.dumps({"requests": n + 1, "errors": ok.count(False)}))
"""

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
        r = place.run([python, "-c", PREWARM_PY, url, str(BATCH), str(threads)], timeout=left, env=env)
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
