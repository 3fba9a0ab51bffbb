"""The server of fake-glance and fake-neutron (``juice.services.openstack.fake_openstack``): STDLIB ONLY,
so that it runs with any place's ``python3`` (an SSH host has no Juice venv). The service
writes this file's source to the place and starts it there::

    python3 juice_fake_server.py glance|neutron IP PORT [SIMULATION.json]

It answers what nova 34 asks (``answer``, pure) and logs one line per request
(``juice-fake <kind> METHOD PATH -> STATUS``) on stdout; SIGTERM ends it.

SIMULATED waits (optional ``SIMULATION.json``: ``{"wait": <distribution>, "failure": p,
"seed": n}``, see ``simwait``, shipped beside this file as ``juice_simwait.py``): the requests of
the simulated stage (``stage_of``) sleep the drawn time before the answer (a ThreadingHTTPServer:
one slow request never holds another) and fail with probability p (``FAILURE``: glance 503,
neutron 500, with the body the real service sends). Draws are keyed by the stage's request
number (reproducible for the same arrival order); every such request's log line ends with
``simulated wait X s``.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

try:
    from juice.services.openstack import simwait
except ImportError:  # run as a script at a place: the copy written beside it
    import juice_simwait as simwait  # type: ignore[import-not-found,no-redef]

IMAGE_ID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "juice.fake-glance.image"))
STAMP = "2026-01-01T00:00:00Z"


def image(base: str) -> dict[str, Any]:
    return {"id": IMAGE_ID, "name": "juice-fake-image", "status": "active", "visibility": "public",
            "container_format": "bare", "disk_format": "raw", "size": 1 << 30, "virtual_size": 1 << 30,
            "min_disk": 0, "min_ram": 0, "protected": False, "os_hidden": False, "tags": [],
            "checksum": "0" * 32, "os_hash_algo": "sha512", "os_hash_value": "0" * 128,
            "owner": "juice", "created_at": STAMP, "updated_at": STAMP,
            "self": f"/v2/images/{IMAGE_ID}", "file": f"/v2/images/{IMAGE_ID}/file",
            "schema": "/v2/schemas/image"}


def image_schema() -> dict[str, Any]:
    props: dict[str, Any] = {k: {"type": ["null", "string"]} for k in
             ("id", "name", "status", "visibility", "container_format", "disk_format", "checksum",
              "owner", "created_at", "updated_at", "self", "file", "schema", "os_hash_algo",
              "os_hash_value")}
    props.update({"size": {"type": ["null", "integer"]}, "virtual_size": {"type": ["null", "integer"]},
                  "min_disk": {"type": "integer"}, "min_ram": {"type": "integer"},
                  "protected": {"type": "boolean"}, "os_hidden": {"type": "boolean"},
                  "tags": {"type": "array", "items": {"type": "string"}}})
    return {"name": "image", "properties": props, "additionalProperties": {"type": "string"},
            "links": [{"rel": "self", "href": "{self}"}, {"rel": "enclosure", "href": "{file}"},
                      {"rel": "describedby", "href": "{schema}"}]}


def answer(kind: str, method: str, path: str, base: str) -> tuple[int, Any]:
    """(status, JSON body) of the fake ``kind`` for one request (pure)."""
    route = path.split("?", 1)[0].rstrip("/")
    if method != "GET":
        return 404, {"error": f"fake-{kind} answers GET only"}
    if kind == "glance":
        if route == "":
            return 200, {"versions": [{"id": "v2.16", "status": "CURRENT",
                                       "links": [{"rel": "self", "href": f"{base}/v2/"}]}]}
        if route == "/v2/schemas/image":
            return 200, image_schema()
        if route == f"/v2/images/{IMAGE_ID}":
            return 200, image(base)
        if route == "/v2/images":
            return 200, {"images": [image(base)], "schema": "/v2/schemas/images", "first": "/v2/images"}
        return 404, {"error": f"fake-glance knows only image {IMAGE_ID}"}
    if route == "":
        return 200, {"versions": [{"id": "v2.0", "status": "CURRENT",
                                   "links": [{"rel": "self", "href": f"{base}/v2.0/"}]}]}
    if re.fullmatch(r"/v2\.0/quotas/[0-9a-zA-Z_-]+(?:\.json)?", route):  # unlimited (-1): nova's port check
        return 200, {"quota": {k: -1 for k in ("network", "subnet", "port", "router", "floatingip",
                                                "security_group", "security_group_rule")}}
    m = re.fullmatch(r"/v2\.0/([a-z0-9_-]+?)(?:\.json)?", route)
    if m:  # every collection is empty (no ports: servers boot with networks none)
        return 200, {m.group(1).replace("-", "_"): []}
    return 404, {"NeutronError": {"type": "NotFound", "message": "fake-neutron: not found", "detail": ""}}


# The stage each fake simulates, and its failure answer (the real services' error bodies).
STAGES = {"glance": "image_fetch", "neutron": "port_create"}
FAILURE: dict[str, tuple[int, Any]] = {
    # glanceclient reads a JSON error as {<any>: {"message": ...}, ...} (exc.from_response)
    "glance": (503, {"error": {"message": "fake-glance: injected failure (simulated)", "code": 503,
                               "title": "Service Unavailable"}}),
    "neutron": (500, {"NeutronError": {
        "type": "HTTPInternalServerError", "detail": "",
        "message": "fake-neutron: injected port creation failure (simulated)"}}),
}


def stage_of(kind: str, method: str, path: str) -> str | None:
    """The simulated stage a request belongs to (None: answered at once).

    glance ``image_fetch``: the image's record (``GET /v2/images/<id>``, which nova-api reads per
    boot; the fake driver downloads nothing, so this is where an image fetch can wait).
    neutron ``port_create``: ``POST /v2.0/ports`` only. With ``networks: none`` (the lab's
    boots) nova creates no port and nova-compute sends neutron nothing during a build (its
    network listing comes at the delete), so no boot request of today's lab is in this stage."""
    route = path.split("?", 1)[0].rstrip("/")
    if kind == "glance":
        return STAGES[kind] if method == "GET" and route == f"/v2/images/{IMAGE_ID}" else None
    return STAGES[kind] if method == "POST" and route in ("/v2.0/ports", "/v2.0/ports.json") else None


def load_simulation(path: str | None) -> dict[str, Any]:
    """The fake's simulation ({} without a file): checked, so a bad one fails at start."""
    if not path:
        return {}
    with open(path) as f:
        sim: dict[str, Any] = json.load(f)
    if sim.get("wait") is not None and (err := simwait.check(sim["wait"])):
        raise SystemExit(f"juice-fake: {path}: wait.{err}")
    if not 0 <= float(sim.get("failure", 0)) <= 1:
        raise SystemExit(f"juice-fake: {path}: failure: expected a probability 0..1")
    return sim


class Simulation:
    """Draws for one fake's stage: the n-th request of the stage waits ``draw(wait, stage, n)``
    and fails when ``fails(failure, seed, stage, n)`` (thread-safe numbering)."""

    def __init__(self, kind: str, sim: dict[str, Any]) -> None:
        self.stage, self.sim = STAGES[kind], sim
        self.seed = int(sim.get("seed", 1))
        self._n = itertools.count()
        self._lock = threading.Lock()

    def next(self) -> tuple[float, bool]:
        """(seconds to wait, whether to fail) for the stage's next request."""
        with self._lock:
            key = str(next(self._n))
        wait = self.sim.get("wait")
        s = simwait.draw(wait, self.stage, key, self.seed) if wait else 0.0
        return s, simwait.fails(float(self.sim.get("failure", 0.0)), self.seed, self.stage, key)


def serve(kind: str, ip: str, port: int, sim_path: str | None = None) -> None:
    base = f"http://{ip}:{port}"
    sim = Simulation(kind, load_simulation(sim_path))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            note, fail = "", False
            simulated = sim.sim and stage_of(kind, self.command, self.path)
            if simulated:
                wait, fail = sim.next()
                time.sleep(wait)  # this request's thread only
                note = f" simulated wait {wait:.3f} s" + (" failure" if fail else "")
            status, body = (FAILURE[kind] if simulated and fail
                            else answer(kind, self.command, self.path, base))
            data = json.dumps(body).encode()
            # logged before the answer: whoever got the answer finds its line in the log
            print(f"juice-fake {kind} {self.command} {self.path} -> {status}{note}", flush=True)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _reply

        def log_message(self, format: str, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer((ip, port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"juice-fake {kind} listening on {base}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
