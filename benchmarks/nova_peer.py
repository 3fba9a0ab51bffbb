"""The nova study's ``NovaServers.boot_server`` sending what Rally 4.1.0 sends (for
``benchmarks/nova_vs_rally.py``): no ``networks`` in ``POST /servers`` and compute
microversion 2.1 (novaclient's default), instead of the study's ``networks: none`` at 2.37.

Why: rally-openstack 4.1.0's ``_boot_server`` walks ``kwargs["nics"]`` as a list of dicts, so
``nics: "none"`` (a string: novaclient's way to ask for ``networks: none`` at 2.37+) fails every
iteration with ``AttributeError: 'str' object has no attribute 'get'``, and at 2.37+ novaclient
refuses a boot without nics. Rally therefore boots at its default microversion without
networks; nova-api then lists the project's and the shared networks and reads the port quota
from (fake-)neutron. This class makes Juice's driver send the same requests; everything else
(users context, pre-poll, polling, atomics, cleanup) is the study's scenario unchanged.

Used as ``DriverJob(scenario="nova_peer:BootServerNoNetworks", args={"users": {...}},
pythonpath=[<benchmarks dir>])`` (a ``module:Class`` scenario gets its args as keywords).
"""

from __future__ import annotations

from typing import Any

from juice.load.api import Context, Env
from juice.studies.nova import scenarios

RALLY_MICROVERSION = "2.1"


class BootServerNoNetworks(scenarios.BootServer):
    def __init__(self, users: dict[str, Any] | None = None) -> None:
        super().__init__({}, {"users": users} if users else None, None)

    async def setup(self, env: Env) -> Context:
        # this driver process only: NovaApi.call reads the module's MICROVERSION per request
        scenarios.MICROVERSION = RALLY_MICROVERSION
        ctx = await super().setup(env)
        nova = ctx[scenarios.CTX]["nova"]
        call = nova.call

        async def without_networks(method: str, path: str, token: str, body: Any = None,
                                   ok: tuple[int, ...] = (200,)) -> tuple[int, Any, str]:
            if method == "POST" and path == "/servers" and isinstance(body, dict):
                body = {"server": {k: v for k, v in body["server"].items() if k != "networks"}}
            out: tuple[int, Any, str] = await call(method, path, token, body, ok)
            return out

        nova.call = without_networks
        return ctx
