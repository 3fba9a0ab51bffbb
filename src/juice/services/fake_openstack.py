"""fake-glance and fake-neutron: STAND-INS for the image and network services, which the nova
study does not measure. Tiny stdlib HTTP servers that answer only what nova 34 asks during a
boot with ``networks: none`` and a delete; every request is logged (``juice-fake <kind> METHOD
PATH -> STATUS``), so what nova really calls can be read in their logs.

Why not the real glance 33 (it co-installs with nova 34): it would need its own database and
migrations, a Keystone user, an image upload and one more server per deployment, none of
which the nova study measures; the compute side never downloads the image (the fake virt
driver spawns no guest). The fakes answer in microseconds and are named fake-* everywhere.

    fakes = FakeServices(lab, ks, progress, site=1)    # both fakes in site 1
    fakes.up()                # processes, health, catalog: image -> :9292, network -> :9696
    IMAGE_ID                  # the one image fake-glance knows (active, raw, 1 GiB)
    fakes.requests("glance")  # [("GET", "/v2/images/<id>", 200), ...] from its log
    fakes.stop()

What nova 34 calls, as seen in their logs (5 boots with ``networks: none``, then deletes):
glance ``GET /`` (version discovery), then per boot ``GET /v2/images/<id>`` and
``GET /v2/schemas/image`` (glanceclient builds its model from the schema); neutron ``GET /``,
per build ``GET /v2.0/networks?tenant_id=<project>&shared=False`` and
``GET /v2.0/networks?shared=True`` (the compute's allocation, even with no network asked for),
``GET /v2.0/ports?tenant_id=<project>&device_id=<server>``, per server show
``GET /v2.0/ports?fields=security_groups&fields=device_id&device_id=<server>``, per delete
``GET /v2.0/ports?device_id=<server>``. Every neutron collection answers an empty list;
anything else 404, except ``GET /v2.0/quotas/<project>`` (every quota -1): a boot BEFORE
microversion 2.37 with no network asked for (what Rally 4.1.0's ``NovaServers.boot_server``
sends: it cannot pass ``nics: none``) makes nova-api list the project's and the shared
networks (none) and read the project's port quota.

Run as ``python -m juice.services.fake_openstack glance|neutron IP PORT`` (Juice's venv).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.services.base import Endpoint, Endpoints, LocalSites, Progress, ServerRecord, Service, quiet
from juice.services.keystone import Keystone
from juice.services.os_api import Catalog, wait_http
from juice.services.process import Server, spawn, stop_all

PORTS = {"glance": 9292, "neutron": 9696}
TYPES = {"glance": "image", "neutron": "network"}
IMAGE_ID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "juice.fake-glance.image"))
STAMP = "2026-01-01T00:00:00Z"
LOG_RE = re.compile(r"juice-fake (\w+) (\w+) (\S+) -> (\d+)")


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
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            print(f"juice-fake {kind} {self.command} {self.path} -> {status}", flush=True)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _reply

        def log_message(self, format: str, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer((ip, port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"juice-fake {kind} listening on {base}", flush=True)
    srv.serve_forever()


class FakeServices(Service):
    """fake-glance and fake-neutron in ``site``, registered in Keystone's catalog."""

    kind = "fake-openstack"

    def __init__(self, lab: LocalSites, ks: Keystone, progress: Progress = quiet, *, site: int = 1) -> None:
        super().__init__(lab, progress)
        self.lab: LocalSites = lab  # not yet written against places: a local lab only
        if site not in lab.sites:
            raise UserError(f"fakes.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        self.ks, self.site = ks, site
        self.servers: dict[str, Server] = {}

    @property
    def home(self) -> Path:
        return self.lab.workdir / f"s{self.site}" / "fake-openstack"

    def log(self, kind: str) -> Path:
        return self.home / f"fake-{kind}.log"

    def url(self, kind: str) -> str:
        return f"http://{self.lab.site_ip(self.site)}:{PORTS[kind]}"

    def configure(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)

    def start(self) -> None:
        for kind, port in PORTS.items():
            argv = [sys.executable, "-m", "juice.services.fake_openstack", kind,
                    self.lab.site_ip(self.site), str(port)]
            self.servers[kind] = spawn(self.lab.place(self.site), argv, log=self.log(kind),
                                       what=f"fake-{kind} in site {self.site}")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        for kind, srv in self.servers.items():
            srv.wait_ready(lambda k=kind: wait_http(self.lab, self.site, self.url(k) + "/"),  # type: ignore[misc]
                           timeout, interval=0.1)
        cat = Catalog(self.lab, self.ks)
        for kind in PORTS:
            cat.register(f"fake-{kind}", TYPES[kind], self.url(kind))
        self.progress(f"fake-glance and fake-neutron answer in site {self.site}, in the catalog")

    def requests(self, kind: str) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the fake ``kind`` answered."""
        try:
            text = self.log(kind).read_text(errors="replace")
        except FileNotFoundError:
            return []
        return [(m.group(2), m.group(3), int(m.group(4))) for m in LOG_RE.finditer(text)]

    def stop(self) -> None:
        if self.servers:
            stop_all(self.servers.values(), grace_s=5)
            self.servers.clear()

    def kill(self, site: int) -> dict[str, Any]:
        if site != self.site or not self.servers:
            raise ServiceError(f"no running fake in site {site}")
        pids = {k: s.kill() for k, s in self.servers.items()}
        self.servers.clear()
        return {"pid": pids.get("glance"), "killed": pids}

    def pids(self) -> list[int]:
        return [s.pid for s in self.servers.values() if s.pid is not None and s.running()]

    def endpoint(self, site: int) -> Endpoints:
        ep = Endpoint("http", self.lab.site_ip(self.site), PORTS["glance"], "", site=self.site)
        return Endpoints(read=ep, write=ep)

    def records(self) -> list[ServerRecord]:
        return [srv.record(f"fake-{k}", port=PORTS[k], datadir=self.home) for k, srv in self.servers.items()]

    def log_files(self) -> list[Path]:
        return [self.log(k) for k in PORTS]


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]))
