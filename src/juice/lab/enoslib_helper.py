"""Reserve or release the machines of a Juice provider with EnOSlib, in EnOSlib's own interpreter.

Not imported by Juice: ``juice.lab.provider.reserve`` runs this file with the Python of a
separate venv holding EnOSlib 10.9.0, because EnOSlib 10.9.0 requires ``rich~=12.0.0`` and Juice
pins ``rich==13.9.4``: they cannot share one environment. Standard library + EnOSlib only::

    <enoslib-python> enoslib_helper.py version                        # EnOSlib's version
    <enoslib-python> enoslib_helper.py up REQUEST.json RESULT.json    # init() + sync_info()
    <enoslib-python> enoslib_helper.py down REQUEST.json              # destroy()

REQUEST: ``{"which": "g5k" | "vagrant", "conf": <EnOSlib configuration>, "sites": N,
"wan_network": "wan", "python": "/usr/bin/python3"}``. RESULT: ``{"hosts": [{"address", "user",
"port", "key_file", "wan_address", "wan_interface"}, ...]}``, one per role ``site-1..site-N``.
Run it in the work directory: Vagrant writes its Vagrantfile in the current directory, and
``down`` finds a Grid'5000 job again by its ``job_name``. Exit 0 on success, 2 on a usage
error, 1 on any other (the reason on stderr, last line).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from types import ModuleType
from typing import Any, TypedDict

# this file's directory is sys.path[0]: its sibling modules (spec, state, check...) must not
# shadow modules EnOSlib or Ansible import
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]


class Request(TypedDict):
    """What Juice asks of this helper (``juice.lab.provider`` writes it as JSON)."""

    which: str  # g5k | vagrant
    conf: dict[str, object]  # EnOSlib's configuration dictionary
    python: str
    sites: int
    wan_network: str


# EnOSlib is not installed in Juice's environment (this runs in EnOSlib's): its objects (the
# provider, hosts, networks) are untyped here, ``Any``
def _provider(en: ModuleType, req: Request) -> Any:
    if req["which"] == "g5k":
        en.set_config(g5k_auto_jump=False)  # Juice connects to the nodes directly
        return en.G5k(en.G5kConf.from_dictionary(req["conf"]))
    return en.Vagrant(en.VagrantConf.from_dictionary(req["conf"]))


def _wan(host: Any, networks: Any) -> tuple[str, str] | None:
    """(IPv4, interface) of ``host`` on one of ``networks`` (after sync_info)."""
    for dev in sorted(host.net_devices, key=lambda d: str(d.name)):
        for a in dev.filter_addresses(networks):
            if a.ip is not None and a.ip.version == 4:
                return str(a.ip.ip), str(dev.name)
    return None


def up(en: ModuleType, req: Request) -> dict[str, list[dict[str, object]]]:
    roles, networks = _provider(en, req).init()
    for h in roles.all():
        h.set_extra(ansible_python_interpreter=req["python"])
    roles = en.sync_info(roles, networks)
    hosts: list[dict[str, object]] = []
    for k in range(1, int(req["sites"]) + 1):
        found = list(roles[f"site-{k}"])
        if not found:
            raise RuntimeError(f"site-{k}: EnOSlib returned no machine with this role")
        h = found[0]
        wan = _wan(h, networks[req["wan_network"]])
        if wan is None:
            raise RuntimeError(f"site-{k} ({h.address}): no IPv4 address on network "
                               f"{req['wan_network']!r} after sync_info")
        key = h.keyfile or (h.extra or {}).get("ansible_ssh_private_key_file")
        hosts.append({"address": str(h.address), "user": str(h.user or "root"),
                      "port": int(h.port or 22), "key_file": None if key is None else str(key),
                      "wan_address": wan[0], "wan_interface": wan[1]})
    return {"hosts": hosts}


def main(argv: list[str]) -> int:
    if argv == ["version"]:
        print(str(importlib.import_module("enoslib").__version__).strip())
        return 0
    if not ((argv[:1] == ["up"] and len(argv) == 3) or (argv[:1] == ["down"] and len(argv) == 2)):
        print("usage: enoslib_helper.py version | up REQUEST.json RESULT.json | down REQUEST.json",
              file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        req: Request = json.load(f)
    try:
        en = importlib.import_module("enoslib")
        if argv[0] == "up":
            result = up(en, req)
            with open(argv[2], "w", encoding="utf-8") as f:
                json.dump(result, f)
        else:
            _provider(en, req).destroy()
    except Exception as e:
        print(f"enoslib_helper {argv[0]}: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
