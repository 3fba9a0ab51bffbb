"""Publish a lab's Keystone to this host, as a user's cloud is: loopback forwarders and a
``clouds.yaml``.

    juice keystone up --lab lab --publish      # → <lab workdir>/clouds.yaml, cloud "juice-lab"

One forwarder (``juice.lab.forward``) per Keystone site listens on ``127.0.0.1:<free port>``
on this host and connects inside the site. ``clouds.yaml`` (mode 0600, openstacksdk's format)
names cloud ``juice-<lab>`` (the first site's Keystone, its region) and ``juice-<lab>-s<k>``
for each site. Each entry also carries ``juice_lab: <lab>`` so that a run against it knows
the target is a Juice lab (``juice run`` asks for ``--yes`` before writing into any other
cloud), and ``juice_endpoints`` (region -> loopback URL): the catalog names the sites'
addresses, which only exist inside the lab, so a high-load run uses these instead. Nothing
here is reachable from outside the host: loopback only.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

from juice.errors import ServiceError
from juice.lab.local import LocalLab
from juice.lab.place import ThisHost
from juice.services.base import ServerRecord
from juice.services.process import Server, spawn
from juice.util import atomic

CLOUDS_FILE = "clouds.yaml"
WAIT_S = 10.0


def start_forwarder(lab: LocalLab, site: int, port: int, workdir: Path) -> tuple[Server, int]:
    """A forwarder 127.0.0.1:<free> → ``site_ip(site):port``; (server, local port)."""
    port_file = workdir / f"forward-s{site}-{port}.port"
    port_file.unlink(missing_ok=True)
    log = workdir / f"forward-s{site}-{port}.log"
    argv = [sys.executable, "-m", "juice.lab.forward", "--ns", lab.site_ns(site),
            "--to", f"{lab.site_ip(site)}:{port}", "--port-file", str(port_file)]
    # on this host, in a session of its own (the forwarder outlives `juice keystone up` and a
    # closed terminal; it moves itself into the site)
    srv = spawn(ThisHost(), argv, log=log, what=f"loopback forwarder to site {site}:{port}")
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if port_file.exists():
            return srv, int(port_file.read_text().strip())
        if srv.exited() is not None:
            break
        time.sleep(0.05)
    srv.stop(grace_s=2)
    raise ServiceError(f"the loopback forwarder to site {site} did not start within {WAIT_S:.0f} s "
                       f"(see {log})")


def forwarder_record(srv: Server, site: int, local_port: int, to_port: int, workdir: Path) -> ServerRecord:
    return srv.record("forwarder", port=local_port, datadir=workdir,
                      extra={"listen": f"127.0.0.1:{local_port}", "to_port": to_port})


def clouds(lab_name: str, sites: dict[int, tuple[int, str]], admin: Any) -> dict[str, Any]:
    """The clouds.yaml document. ``sites``: site -> (local port, region)."""
    out: dict[str, Any] = {}
    first = min(sites)
    endpoints = {region: f"http://127.0.0.1:{port}/v3" for port, region in sites.values()}
    for name, site in [(f"juice-{lab_name}", first), *((f"juice-{lab_name}-s{s}", s) for s in sorted(sites))]:
        port, region = sites[site]
        out[name] = {
            "auth": {"auth_url": f"http://127.0.0.1:{port}/v3", "username": admin.username,
                     "password": admin.password, "project_name": admin.project_name,
                     "user_domain_name": admin.user_domain_name,
                     "project_domain_name": admin.project_domain_name},
            "region_name": region, "identity_api_version": 3, "interface": "public",
            "juice_lab": lab_name, "juice_endpoints": dict(endpoints),
        }
    return {"clouds": out}


def write_clouds(workdir: Path, doc: dict[str, Any]) -> Path:
    path = workdir / CLOUDS_FILE
    atomic.write_text(path, "# written by `juice keystone up --publish` (holds the admin password)\n"
                      + yaml.safe_dump(doc, sort_keys=False), mode=0o600)
    return path
