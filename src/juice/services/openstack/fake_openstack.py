"""fake-glance and fake-neutron: STAND-INS for the image and network services. Tiny stdlib HTTP
servers that answer only what nova 34 asks during a boot with ``networks: none`` and a delete;
every request is logged (``juice-fake <kind> METHOD PATH -> STATUS``), so what nova really calls
can be read in their logs.

The nova study's image service is the real glance-api (``juice.services.openstack.glance``);
fake-glance runs only when a spec asks for it (``image_service: fake-glance``: the largest node
counts, the simulated image waits; a recorded deviation). It validates no token, has no
database and serves no image data (the nodes then download nothing). The fakes answer in
microseconds and are named fake-* everywhere, unless SIMULATED waits and failures are given
(``simulation``: docs/nova-simulation.md).

    fakes = FakeServices(lab, ks, progress, site=1)    # both fakes in site 1
    fakes.up()                # processes, health, catalog: image -> :9292, network -> :9696
    IMAGE_ID                  # the one image fake-glance knows (active, raw, 1 GiB)
    fakes.requests("glance")  # [("GET", "/v2/images/<id>", 200), ...] from its log
    fakes.stop()

What nova 34 calls, as seen in their logs (5 boots with ``networks: none``, then deletes):
glance ``GET /`` (version discovery), then per boot ``GET /v2/images/<id>`` and
``GET /v2/schemas/image`` (glanceclient builds its model from the schema); neutron ``GET /``,
per build ``GET /v2.0/networks?tenant_id=<project>&shared=False`` and
``GET /v2.0/networks?shared=True`` (nova-compute's; with simulated failures they were seen
at the server's delete, ``get_instance_nw_info``, not during the build),
``GET /v2.0/ports?tenant_id=<project>&device_id=<server>``, per server show
``GET /v2.0/ports?fields=security_groups&fields=device_id&device_id=<server>``, per delete
``GET /v2.0/ports?device_id=<server>``. Every neutron collection answers an empty list;
anything else 404, except ``GET /v2.0/quotas/<project>`` (every quota -1): a boot BEFORE
microversion 2.37 with no network asked for (what Rally 4.1.0's ``NovaServers.boot_server``
sends: it cannot pass ``nics: none``) makes nova-api list the project's and the shared
networks (none) and read the project's port quota.

The server is ``juice.services.openstack.fake_server`` (stdlib only): its source is written to the site's
place (``<root>/s<site>/fake-openstack/juice_fake_server.py``) and run there with the place's
``python3`` (``python3 juice_fake_server.py glance|neutron IP PORT``), so the fakes run in a
namespace here and on an SSH host (no Juice venv there) alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from juice.errors import ServiceError, UserError
from juice.lab.place import Place
from juice.services.base import Progress, ServerRecord, Service, Sites, quiet
from juice.services.openstack import fake_server, simwait
from juice.services.openstack.fake_server import IMAGE_ID, STAGES, STAMP, answer, image, image_schema
from juice.services.openstack.keystone import Keystone
from juice.services.openstack.os_api import Catalog, wait_http
from juice.services.process import Server, spawn, stop_all

__all__ = ["IMAGE_ID", "PORTS", "STAMP", "FakeServices", "answer", "image", "image_schema"]

PORTS = {"glance": 9292, "neutron": 9696}
TYPES = {"glance": "image", "neutron": "network"}
LOG_RE = re.compile(r"juice-fake (\w+) (\w+) (\S+) -> (\d+)")  # + " simulated wait X s" (waits)
SCRIPT = "juice_fake_server.py"  # fake_server's source, written to the place


class FakeServices(Service):
    """fake-glance and fake-neutron in ``site``, registered in Keystone's catalog."""

    kind = "fake-openstack"

    def __init__(self, lab: Sites, ks: Keystone, progress: Progress = quiet, *, site: int = 1,
                 simulation: dict[str, dict[str, Any]] | None = None,
                 kinds: tuple[str, ...] = tuple(PORTS)) -> None:
        """``kinds``: the fakes to run (glance, neutron; default both): a real service runs
        instead of the others (e.g. the real glance: ``kinds=("neutron",)``)."""
        super().__init__(lab, progress)
        if site not in lab.sites:
            raise UserError(f"fakes.site: {site} is not a site of this lab (1..{len(lab.sites)})")
        if not kinds or not set(kinds) <= set(PORTS):
            raise UserError(f"fakes.kinds: expected some of {', '.join(PORTS)}, got {list(kinds)}")
        self.ks, self.site, self.kinds = ks, site, tuple(k for k in PORTS if k in kinds)
        # SIMULATED waits and failures per fake (``fake_server.Simulation``): {"glance": {"wait":
        # <distribution>, "failure": p, "seed": n}, "neutron": {...}}; none: they answer at once
        self.simulation = {k: v for k, v in (simulation or {}).items() if v}
        for k, v in self.simulation.items():
            if k not in self.kinds:
                raise UserError(f"fakes.simulation: {k!r} is not a fake of this deployment "
                                f"({', '.join(self.kinds)})")
            if v.get("wait") is not None and (err := simwait.check(v["wait"])):
                raise UserError(f"fakes.{STAGES[k]}_s.{err}")
        self.servers: dict[str, Server] = {}

    @property
    def place(self) -> Place:
        return self.lab.place(self.site)

    @property
    def home(self) -> Path:
        return self.place.root / f"s{self.site}" / "fake-openstack"

    def log(self, kind: str) -> Path:
        return self.home / f"fake-{kind}.log"

    def url(self, kind: str) -> str:
        return f"http://{self.lab.site_ip(self.site)}:{PORTS[kind]}"

    def configure(self) -> None:
        place = self.place
        if not place.run(["python3", "-c", "import http.server"]).ok:
            raise ServiceError(f"{place.label}: fake-glance/fake-neutron need python3 there "
                               "(install python3 on the host)")
        place.remove(self.home)
        place.mkdir(self.home)
        place.write(self.home / SCRIPT, Path(fake_server.__file__).read_bytes())
        place.write(self.home / "juice_simwait.py", Path(simwait.__file__).read_bytes())
        for kind, sim in self.simulation.items():
            place.write(self.home / f"simulation-{kind}.json", json.dumps(sim, indent=1))

    def start(self) -> None:
        for kind in self.kinds:
            port = PORTS[kind]
            argv = ["python3", str(self.home / SCRIPT), kind, self.lab.site_ip(self.site), str(port)]
            if kind in self.simulation:
                argv.append(str(self.home / f"simulation-{kind}.json"))
            self.servers[kind] = spawn(self.place, argv, log=self.log(kind), cwd=self.home,
                                       what=f"fake-{kind} in site {self.site}")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        for kind, srv in self.servers.items():
            srv.wait_ready(lambda k=kind: wait_http(self.lab, self.site, self.url(k) + "/"),  # type: ignore[misc]
                           timeout, interval=0.1)
        cat = Catalog(self.lab, self.ks)
        for kind in self.kinds:
            cat.register(f"fake-{kind}", TYPES[kind], self.url(kind))
        self.progress(f"{' and '.join(f'fake-{k}' for k in self.kinds)} answer in site {self.site}, "
                      "in the catalog")

    def requests(self, kind: str) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the fake ``kind`` answered."""
        raw = self.place.read(self.log(kind))
        if raw is None:
            return []
        text = raw.decode(errors="replace")
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

    def records(self) -> list[ServerRecord]:
        return [srv.record(f"fake-{k}", port=PORTS[k], datadir=self.home) for k, srv in self.servers.items()]

    def logs(self) -> list[tuple[Place, Path]]:
        return [(self.place, self.log(k)) for k in self.kinds]
