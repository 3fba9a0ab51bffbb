"""nova's REST API from inside a site (stdlib only, one connection per request, no retries).

    cli = NovaClient.login(lab, 2, nova.api_url(), ks.admin_credentials())  # token from Keystone
    flavor = cli.ensure_flavor("juice-small", vcpus=1, ram_mb=512, disk_gb=1)
    sid = cli.boot("juice-vm-1", flavor, IMAGE_ID)       # networks "none" (microversion 2.37+)
    cli.wait_status(sid, "ACTIVE", timeout=120)            # bounded; ServiceError with the fault
    cli.delete(sid); cli.wait_gone(sid, timeout=120)

Every call crosses the emulated WAN from ``site`` (``keystone_http.request``). A load driver
running in a site can use the same calls; ``last_request_id`` keeps the
``x-openstack-request-id`` of the last answer (for tracing).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypedDict
from urllib.parse import quote

from juice.errors import ServiceError
from juice.lab.place import Sites
from juice.openstack.creds import AdminCredentials
from juice.openstack.http import Response, issue_token, request

MICROVERSION = "2.37"  # the first with "networks": "none"


class Fault(TypedDict, total=False):
    message: str
    code: int


# a server as GET /servers/<id> answers it: the fields Juice reads
Server = TypedDict("Server", {"id": str, "name": str, "status": str, "fault": Fault,
                              "OS-EXT-STS:task_state": str | None}, total=False)


class Hypervisor(TypedDict, total=False):
    id: int | str
    hypervisor_hostname: str
    state: str
    status: str


@dataclass
class NovaClient:
    lab: Sites
    site: int
    url: str                     # nova's /v2.1
    token: str
    microversion: str = MICROVERSION
    last_request_id: str = ""

    @classmethod
    def login(cls, lab: Sites, site: int, url: str, creds: AdminCredentials,
              microversion: str = MICROVERSION) -> NovaClient:
        return cls(lab, site, url, issue_token(lab, site, creds), microversion)

    def call(self, method: str, path: str, body: object = None, ok: tuple[int, ...] = (200,),
             timeout: float = 60.0) -> Response:
        r = request(self.lab, self.site, method, self.url + path, body=body, timeout=timeout,
                    headers={"X-Auth-Token": self.token,
                             "OpenStack-API-Version": f"compute {self.microversion}"})
        self.last_request_id = r.headers.get("x-openstack-request-id", "")
        if r.status not in ok:
            raise ServiceError(f"nova {method} {path}: {r.status} {r.body[:300]!r}")
        return r

    def ensure_flavor(self, name: str, *, vcpus: int, ram_mb: int, disk_gb: int) -> str:
        """The id of flavor ``name`` (created public when missing)."""
        for f in self.call("GET", "/flavors").json()["flavors"]:
            if f["name"] == name:
                return str(f["id"])
        body = {"flavor": {"name": name, "vcpus": vcpus, "ram": ram_mb, "disk": disk_gb}}
        return str(self.call("POST", "/flavors", body).json()["flavor"]["id"])

    def boot(self, name: str, flavor: str, image: str, *, count: int = 1,
             network: str | None = None) -> str:
        """POST /servers with ``networks: none``, or one port on ``network`` (a neutron network
        id); the server id (the first, when count > 1)."""
        server: dict[str, object] = {"name": name, "flavorRef": flavor, "imageRef": image,
                                     "networks": [{"uuid": network}] if network else "none"}
        if count > 1:
            server.update({"min_count": count, "max_count": count})
        body = {"server": server}
        return str(self.call("POST", "/servers", body, ok=(202,)).json()["server"]["id"])

    def server(self, sid: str) -> Server | None:
        """GET /servers/<id> (None when it is gone)."""
        r = self.call("GET", f"/servers/{sid}", ok=(200, 404))
        if r.status == 404:
            return None
        out: Server = r.json()["server"]
        return out

    def servers(self, name: str | None = None) -> list[Server]:
        q = f"?name={quote(name)}" if name else ""  # nova: a regular expression
        out: list[Server] = self.call("GET", f"/servers/detail{q}").json()["servers"]
        return out

    def wait_status(self, sid: str, want: str = "ACTIVE", timeout: float = 300.0,
                    interval: float = 0.5) -> Server:
        """Poll until the server's status is ``want`` (bounded); ServiceError at ERROR (with
        nova's fault message) or at the deadline (with the last status and task state)."""
        deadline = time.monotonic() + timeout
        last: Server = {}
        while True:
            srv = self.server(sid)
            if srv is None:
                raise ServiceError(f"server {sid}: gone while waiting for {want}")
            last = srv
            if srv["status"] == want:
                return srv
            if srv["status"] == "ERROR" and want != "ERROR":
                fault = srv.get("fault", {}).get("message", "no fault recorded")
                raise ServiceError(f"server {sid}: ERROR ({fault})")
            if time.monotonic() >= deadline:
                raise ServiceError(f"server {sid}: not {want} after {timeout:.0f} s "
                                   f"(status {last.get('status')}, task {last.get('OS-EXT-STS:task_state')})")
            time.sleep(interval)

    def delete(self, sid: str) -> None:
        self.call("DELETE", f"/servers/{sid}", ok=(204, 404))

    def wait_gone(self, sid: str, timeout: float = 300.0, interval: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        while self.server(sid) is not None:
            if time.monotonic() >= deadline:
                raise ServiceError(f"server {sid}: still there {timeout:.0f} s after its deletion")
            time.sleep(interval)

    def hypervisors(self) -> list[Hypervisor]:
        out: list[Hypervisor] = self.call("GET", "/os-hypervisors").json()["hypervisors"]
        return out
