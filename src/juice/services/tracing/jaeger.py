"""Jaeger v2 (``cmd/jaeger`` of github.com/jaegertracing/jaeger, v1.76.0): in-memory storage,
an OTLP/HTTP receiver and the query API (and UI) in one site.

    j = Jaeger(lab, progress, site=1)      # pure: nothing started
    j.up()                                  # configure + start + wait_healthy (bounded)
    j.load(otlp_doc)                        # POST an OTLP/JSON document to /v1/traces, from the site
    j.wait_traces("nova", 6, window)        # until the query API finds them (the batch processor)
    j.traces("nova", window)                # GET /api/traces?service=nova (Jaeger's JSON model)
    j.query_url()                           # "http://10.210.1.2:16686" (UI + API, inside the lab)
    j.stop()

The binary is built from the Go module by ``scripts/jaeger.sh`` into
``/var/cache/juice/bin/juice-jaeger-1.76.0`` (``ensure_built`` runs it once, on demand: the
quickstart's set-up does not build it). At a place that does not see this machine's files (an
SSH host) the static binary is copied under the lab's directory there. The configuration
(``config``, pure) is the OpenTelemetry-collector style YAML of Jaeger v2: receiver ``otlp``
(HTTP only), processor ``batch``, exporter ``jaeger_storage_exporter``, extensions
``jaeger_storage`` (memory backend), ``jaeger_query`` and ``healthcheckv2``; every listener on
the site's address, internal metrics off (no fixed port 8888 taken), self-tracing off (so only
the loaded traces are in the store).

The Go module carries no built Jaeger UI (the UI is a separate JavaScript project): the UI
address then serves Jaeger's placeholder page while the API works. ``ui_assets`` points the
query service at a jaeger-ui build (its ``index.html`` directory) when one is at hand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from juice.errors import ServiceError
from juice.lab.place import Place
from juice.paths import native_bin
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.process import Server, spawn
from juice.util.jsontypes import JSONValue, as_list, as_object, get_in

VERSION = "1.76.0"
BINARY = f"juice-jaeger-{VERSION}"
OTLP_HTTP_PORT = 4318
QUERY_HTTP_PORT = 16686
QUERY_GRPC_PORT = 16685
HEALTH_PORT = 13133
STORE = "juice_memory"
BUILD_SCRIPT = Path(__file__).resolve().parents[4] / "scripts" / "jaeger.sh"
CHUNK_BYTES = 4 << 20  # OTLP/HTTP's default body limit is 20 MiB: POST in pieces well below it


def binary() -> Path:
    """Where ``scripts/jaeger.sh`` installs Jaeger on this machine."""
    return native_bin(BINARY)


def ensure_built(progress: Progress = quiet, script: Path = BUILD_SCRIPT) -> Path:
    """The Jaeger binary, built first by ``scripts/jaeger.sh`` when it is missing (once: many
    minutes on a cold Go cache, progress every 30 s). ServiceError naming the fix otherwise."""
    b = binary()
    if b.exists():
        return b
    if not script.exists():
        raise ServiceError(f"{b} is missing and {script} is not there to build it: "
                           "run scripts/jaeger.sh from a Juice checkout")
    progress(f"building Jaeger {VERSION} into {b} with scripts/jaeger.sh (once; a first build "
             "compiles for many minutes, niced)")
    t0 = time.monotonic()
    p = subprocess.Popen(["bash", str(script), str(b.parent)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    out = p.stdout
    reader = threading.Thread(target=lambda: lines.extend(x.rstrip() for x in out or []), daemon=True)
    reader.start()  # the script prints a few lines; the compiler is silent for minutes
    while True:
        try:
            code = p.wait(timeout=30)
            break
        except subprocess.TimeoutExpired:
            progress(f"still building Jaeger {VERSION} ({(time.monotonic() - t0) / 60:.0f} min)")
        except BaseException:  # Ctrl-C: stop the build (a later run starts it again)
            os.killpg(p.pid, signal.SIGTERM)  # the script and the go build it runs
            p.wait(timeout=30)
            raise
    reader.join(timeout=5)
    if code == 3:
        raise ServiceError(f"Jaeger cannot be built here: {lines[-1] if lines else 'no Go toolchain'}")
    if code != 0 or not b.exists():
        raise ServiceError(f"scripts/jaeger.sh failed with code {code}: "
                           f"{' | '.join(lines[-5:]) or 'no output'}")
    progress(f"built {b} in {time.monotonic() - t0:.0f} s")
    return b


def config(ip: str, *, max_traces: int = 100_000, ui_assets: Path | None = None) -> dict[str, object]:
    """Jaeger v2's configuration (pure): OTLP/HTTP in, memory storage, query API/UI on ``ip``."""
    query: dict[str, object] = {
        "storage": {"traces": STORE},
        "enable_tracing": False,
        "max_clock_skew_adjust": "0s",  # Juice already corrected the skew: show its times
        "http": {"endpoint": f"{ip}:{QUERY_HTTP_PORT}"},
        "grpc": {"endpoint": f"{ip}:{QUERY_GRPC_PORT}"},
    }
    if ui_assets is not None:
        query["ui"] = {"assets_path": str(ui_assets)}
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"],
                                     "exporters": ["jaeger_storage_exporter"]}},
            "telemetry": {"resource": {"service.name": "jaeger"}, "metrics": {"level": "none"},
                          "logs": {"level": "info"}},
        },
        "extensions": {
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"{ip}:{HEALTH_PORT}"}},
            "jaeger_query": query,
            "jaeger_storage": {"backends": {STORE: {"memory": {"max_traces": max_traces}}}},
        },
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"{ip}:{OTLP_HTTP_PORT}"}}}},
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": STORE}},
    }


def chunks(doc: Mapping[str, object], limit: int = CHUNK_BYTES) -> list[bytes]:
    """``doc`` (OTLP/JSON) as request bodies of at most about ``limit`` bytes each, split
    between its ``resourceSpans`` (a single larger resource is sent alone)."""
    out: list[bytes] = []
    batch: list[object] = []
    size = 0
    for rs in as_list(doc.get("resourceSpans", [])):
        n = len(json.dumps(rs, separators=(",", ":")))
        if batch and size + n > limit:
            out.append(json.dumps({"resourceSpans": batch}, separators=(",", ":")).encode())
            batch, size = [], 0
        batch.append(rs)
        size += n
    if batch:
        out.append(json.dumps({"resourceSpans": batch}, separators=(",", ":")).encode())
    return out


class Jaeger(Service):
    """One Jaeger (all in one process) in ``site``."""

    kind = "jaeger"

    def __init__(self, lab: Sites, progress: Progress = quiet, site: int = 1, max_traces: int = 100_000,
                 ui_assets: Path | None = None) -> None:
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise ServiceError(f"site: {site} is not a site of this lab (1..{len(lab.sites)})")
        if max_traces < 1:
            raise ServiceError(f"max_traces: must be >= 1, got {max_traces}")
        self.site = site
        self.max_traces = max_traces
        self.ui_assets = ui_assets
        self.server: Server | None = None
        self.exe = str(binary())

    @property
    def place(self) -> Place:
        return self.lab.place(self.site)

    def home(self) -> Path:
        return self.place.root / f"s{self.site}" / "jaeger"

    def log(self) -> Path:
        return self.home() / f"jaeger-s{self.site}.log"

    def query_url(self) -> str:
        """The query service (API and UI), as a client in the lab reaches it."""
        return f"http://{self.lab.site_ip(self.site)}:{QUERY_HTTP_PORT}"

    def otlp_url(self) -> str:
        return f"http://{self.lab.site_ip(self.site)}:{OTLP_HTTP_PORT}/v1/traces"

    # ---- lifecycle -----------------------------------------------------------------------
    def configure(self) -> None:
        place, local = self.place, binary()
        place.remove(self.home())
        place.mkdir(self.home())
        shipped = place.root / "bin" / BINARY  # at an SSH host: once per lab, beside the delayer
        if place.run(["test", "-x", str(local)]).ok:
            self.exe = str(local)
        elif place.run(["test", "-x", str(shipped)]).ok:
            self.exe = str(shipped)
        elif local.exists() and not place.shared_disk:  # an SSH host: ship the static binary
            self.progress(f"copying {BINARY} ({local.stat().st_size >> 20} MiB) to {place.label}")
            place.mkdir(shipped.parent)
            place.write(shipped, local.read_bytes(), mode=0o755)
            self.exe = str(shipped)
        else:
            raise ServiceError(f"{place.label}: {local} is missing: run scripts/jaeger.sh")
        cfg = config(place.address, max_traces=self.max_traces, ui_assets=self.ui_assets)
        place.write(self.home() / "config.yaml", yaml.safe_dump(cfg, sort_keys=False))

    def start(self) -> None:
        self.server = spawn(self.place, [self.exe, "--config", str(self.home() / "config.yaml")],
                            log=self.log(), what=f"jaeger in site {self.site}")
        self.progress(f"jaeger {VERSION} starting in site {self.site}")

    def ping(self) -> bool:
        """True when the OTLP receiver accepts connections and the query API answers."""
        ip = self.lab.site_ip(self.site)
        if not self.place.tcp_open(ip, OTLP_HTTP_PORT):
            return False
        status, _ = self.place.http(f"{self.query_url()}/api/services", timeout=3)
        return status == 200

    def wait_healthy(self, timeout: float = 60.0) -> None:
        if self.server is None:
            raise ServiceError("jaeger: not started")
        self.server.wait_ready(self.ping, timeout, interval=0.2)
        self.progress(f"jaeger ready at {self.query_url()} (OTLP/HTTP {self.otlp_url()})")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace_s=10)
            self.server = None
            self.progress("jaeger stopped")

    def records(self) -> list[ServerRecord]:
        if self.server is None:
            return []
        return [self.server.record(self.kind, port=QUERY_HTTP_PORT, datadir=self.home(),
                                   extra={"otlp_http": OTLP_HTTP_PORT, "version": VERSION})]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log())]

    # ---- data ----------------------------------------------------------------------------
    def load(self, doc: Mapping[str, object]) -> int:
        """POST ``doc`` (OTLP/JSON) to the OTLP/HTTP receiver from inside the site; the number
        of requests. ServiceError when Jaeger refuses any span."""
        bodies = chunks(doc)
        for body in bodies:
            try:
                status, _, answer = self.place.request(
                    "POST", self.otlp_url(), body, {"Content-Type": "application/json"}, timeout=60)
            except OSError as e:
                raise ServiceError(f"jaeger's OTLP receiver {self.otlp_url()}: no answer ({e})") from e
            text = answer.decode(errors="replace")
            if status != 200:
                raise ServiceError(f"jaeger refused the traces: HTTP {status} {text[:200]}")
            rejected = get_in(json.loads(text or "{}"), "partialSuccess", "rejectedSpans")
            if rejected:
                raise ServiceError(f"jaeger rejected {rejected} spans: {text[:200]}")
        return len(bodies)

    def api(self, path: str, params: Mapping[str, object] | None = None) -> JSONValue:
        """GET the query API (``/api/...``) from inside the site; its JSON."""
        url = f"{self.query_url()}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        try:  # place.request, not place.http: the whole body (http reads its first 4 KiB)
            status, _, body = self.place.request("GET", url, timeout=30)
        except OSError as e:
            raise ServiceError(f"jaeger {path}: no answer ({e})") from e
        if status != 200:
            raise ServiceError(f"jaeger {path}: HTTP {status} {body[:200].decode(errors='replace')}")
        doc: JSONValue = json.loads(body)
        return doc

    def traces(self, service: str, window_us: tuple[int, int], limit: int = 100_000) -> list[JSONValue]:
        """Every trace with a span of ``service`` starting in ``window_us`` (Unix µs)."""
        got = self.api("/api/traces", {"service": service, "start": window_us[0], "end": window_us[1],
                                       "limit": limit})
        return as_list(as_object(got).get("data"))

    def wait_traces(self, service: str, n: int, window_us: tuple[int, int], timeout: float = 30.0,
                    sleep: Callable[[float], None] = time.sleep) -> list[JSONValue]:
        """The traces of ``service`` once the query API finds ``n`` of them (spans pass a batch
        processor before they are stored); ServiceError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.traces(service, window_us, limit=max(n, 1) * 2)
            if len(got) >= n or time.monotonic() >= deadline:
                break
            sleep(0.2)
        if len(got) < n:
            raise ServiceError(f"jaeger holds {len(got)} of the {n} traces loaded after {timeout:.0f} s")
        return got
