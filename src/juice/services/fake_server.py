"""The server of fake-glance and fake-neutron (``juice.services.fake_openstack``): STDLIB ONLY,
so that it runs with any place's ``python3`` (an SSH host has no Juice venv). The service
writes this file's source to the place and starts it there::

    python3 juice_fake_server.py glance|neutron IP PORT

It answers what nova 34 asks (``answer``, pure) and logs one line per request
(``juice-fake <kind> METHOD PATH -> STATUS``) on stdout; SIGTERM ends it.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


def serve(kind: str, ip: str, port: int) -> None:
    base = f"http://{ip}:{port}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            status, body = answer(kind, self.command, self.path, base)
            data = json.dumps(body).encode()
            # logged before the answer: whoever got the answer finds its line in the log
            print(f"juice-fake {kind} {self.command} {self.path} -> {status}", flush=True)
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
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]))
