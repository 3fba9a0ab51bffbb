"""``juice trace … --jaeger``: the traced boots in a real Jaeger, for a person to browse.

    show(doc, keep_s=None, announce=print)   # lab up → Jaeger → load → forwarder → wait → all down

A one-site ephemeral lab is made, Jaeger (``juice.services.tracing.jaeger``) started in its site, the
OTLP/JSON document (``juice.trace.otlp``) POSTed to its OTLP/HTTP receiver, and the load
checked through the query API (as many ``nova`` traces as boots). A loopback forwarder then
makes the query service (UI and API) reachable at ``http://127.0.0.1:<port>`` on this host, and
``announce`` gets that address and a search link covering the boots' time range (Jaeger's
search looks at the last hour by default; traced runs are usually older). Then it waits for
Ctrl-C (or ``keep_s`` seconds) and removes everything: the lab's teardown ends Jaeger and the
forwarder even after a crash (the next juice command sweeps an ephemeral lab).
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from juice.services.base import Progress, quiet
from juice.trace.otlp import Document

ROOT_SERVICE = "nova"  # the resource of the boots' root spans (juice.trace.otlp)


@dataclass(frozen=True)
class Loaded:
    """What ``show`` loaded and where it was served (for messages and tests)."""

    traces: int                  # traces in the document = boots
    found: int                   # traces of ROOT_SERVICE the query API returned
    window_us: tuple[int, int]   # Unix µs covering every span (widened by 1 s each side)
    ui: str                      # http://127.0.0.1:<port>


def extent(doc: Document) -> tuple[int, tuple[int, int]]:
    """(number of traces, (start, end) in Unix µs around every span, widened by 1 s)."""
    ids: set[str] = set()
    starts: list[int] = []
    ends: list[int] = []
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                ids.add(s["traceId"])
                starts.append(int(s["startTimeUnixNano"]) // 1000)
                ends.append(int(s["endTimeUnixNano"]) // 1000)
    if not ids:
        return 0, (0, 0)
    return len(ids), (min(starts) - 1_000_000, max(ends) + 1_000_000)


def search_link(ui: str, window_us: tuple[int, int], limit: int) -> str:
    """The UI's search page for the boots (service, time range, limit)."""
    q = urllib.parse.urlencode({"service": ROOT_SERVICE, "start": window_us[0], "end": window_us[1],
                                "limit": limit, "lookback": "custom"})
    return f"{ui}/search?{q}"


def show(doc: Document, *, keep_s: float | None = None, ui_assets: Path | None = None,
         announce: Callable[[str], None] = print, progress: Progress = quiet) -> Loaded:
    """Serve ``doc`` in Jaeger until Ctrl-C (``keep_s`` None) or for ``keep_s`` seconds; what
    was loaded and where it was served."""
    from juice.lab import spec as labspec
    from juice.lab.local import LocalLab, require_root
    from juice.services.openstack.keystone_publish import start_forwarder
    from juice.services.tracing.jaeger import QUERY_HTTP_PORT, Jaeger, ensure_built

    n, window = extent(doc)
    if n == 0:
        from juice.errors import UserError

        raise UserError("--jaeger: no boot was traced, so there is nothing to show")
    require_root()
    ensure_built(progress)
    ls = labspec.parse({"name": f"jaeger{os.getpid() % 100000}", "sites": 1, "delay_ms": 0})
    with LocalLab.up(ls, ephemeral=True, progress=progress) as lab:
        jaeger = Jaeger(lab, progress, site=1, max_traces=max(100_000, n), ui_assets=ui_assets)
        with jaeger:
            jaeger.up()
            posts = jaeger.load(doc)
            found = jaeger.wait_traces(ROOT_SERVICE, n, window)
            progress(f"loaded {n} traces into jaeger ({posts} OTLP request(s)); its API finds {len(found)}")
            fwd, port = start_forwarder(lab, 1, QUERY_HTTP_PORT, lab.workdir)
            try:
                loaded = Loaded(n, len(found), window, f"http://127.0.0.1:{port}")
                announce(f"Jaeger UI: {loaded.ui}  ({n} boots; API {loaded.ui}/api/traces)")
                announce(f"the boots: {search_link(loaded.ui, window, n)}")
                _, page = jaeger.place.http(f"{jaeger.query_url()}/", timeout=10)
                if "placeholder" in page.lower():
                    announce("note: this Jaeger has no UI assets (the Go module ships none), so the page "
                             "is a placeholder; the API works, and --jaeger-ui DIR serves a jaeger-ui build")
                _wait(keep_s, announce)
            finally:
                fwd.stop(grace_s=2)
    return loaded


def _wait(keep_s: float | None, announce: Callable[[str], None]) -> None:
    """Until ``keep_s`` s have passed (None: forever); Ctrl-C or SIGTERM ends it early."""
    announce(f"keeping jaeger up for {keep_s:g} s" if keep_s is not None
             else "press Ctrl-C to stop jaeger and remove its lab")
    deadline = time.monotonic() + keep_s if keep_s is not None else None
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(max(0.0, min(3600.0, deadline - time.monotonic())) if deadline is not None else 3600.0)
    except KeyboardInterrupt:
        announce("stopping jaeger")
