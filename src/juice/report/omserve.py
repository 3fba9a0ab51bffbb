"""The OpenMetrics export served over HTTP while runs are being written, for a Prometheus to
scrape (``juice export openmetrics RESULTS --serve [HOST:]PORT``).

Each scrape of ``/metrics`` renders the results as stored at that moment
(``juice.report.openmetrics.export``): a run appears once its directory is complete (the store
writes a run atomically), so a sweep in progress shows up run by run. Renders are cached for
``min_interval_s`` so that several scrapers (or a fast one) do not re-read a large results
directory each time. Besides the export's families it adds what a dashboard of a sweep in
progress wants::

    juice_export_runs                  runs exported at this scrape
    juice_export_render_seconds        how long the render took
    juice_export_last_render_timestamp_seconds

Only a loopback address is accepted: the export is served for a Prometheus on this machine
(or reached through an SSH tunnel), never on another interface.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from juice.errors import UserError
from juice.report.openmetrics import export

CONTENT_TYPE = {"openmetrics": "application/openmetrics-text; version=1.0.0; charset=utf-8",
                "prometheus": "text/plain; version=0.0.4; charset=utf-8"}


def parse_address(value: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` -> (host, port); the host must be a loopback address."""
    host, _, port_s = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_s)
    except ValueError:
        raise UserError(f"--serve: {value!r} is not PORT or HOST:PORT (e.g. 9464 or 127.0.0.1:9464)"
                        ) from None
    if not 0 <= port <= 65535:
        raise UserError(f"--serve: port {port} is not 0..65535")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise UserError(f"--serve: {host} is not a loopback address; serve on 127.0.0.1 and reach it "
                        "from elsewhere through an SSH tunnel")
    return host, port


class Renderer:
    """The export text, re-rendered from disk at most every ``min_interval_s``."""

    def __init__(self, paths: Sequence[Path], fmt: str, min_interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.paths, self.fmt, self.min_interval_s, self.clock = list(paths), fmt, min_interval_s, clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._text = ""
        self.renders = 0

    def text(self) -> str:
        with self._lock:
            now = self.clock()
            if self._at is None or now - self._at >= self.min_interval_s:
                t0 = time.perf_counter()
                body, runs = export(self.paths, self.fmt)
                took = time.perf_counter() - t0
                self._text = _with_own(body, runs, took, time.time(), self.fmt)
                self._at, self.renders = now, self.renders + 1
            return self._text


def _with_own(body: str, runs: int, took_s: float, at: float, fmt: str) -> str:
    """The export's text plus the server's own families (before OpenMetrics' ``# EOF``)."""
    own = "".join(
        f"# HELP {name} {text}\n# TYPE {name} gauge\n{name} {value}\n"
        for name, text, value in (
            ("juice_export_runs", "runs exported at this scrape", f"{runs}"),
            ("juice_export_render_seconds", "how long rendering the export took", f"{took_s:.6f}"),
            ("juice_export_last_render_timestamp_seconds", "when the export was last rendered",
             f"{at:.3f}")))
    if fmt == "openmetrics" and body.endswith("# EOF\n"):
        return body[: -len("# EOF\n")] + own + "# EOF\n"
    return body + own


def server(renderer: Renderer, host: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server answering ``GET /metrics`` with ``renderer``'s text (404 elsewhere)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics is served")
                return
            try:
                data = renderer.text().encode()
            except Exception as e:  # a results directory being written: answer, never die
                self.send_error(500, f"export failed: {e}"[:200])
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE[renderer.fmt])
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # the base's names
            return

    return ThreadingHTTPServer((host, port), Handler)
