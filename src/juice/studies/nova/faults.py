"""The nova study's hands for a fault schedule (``juice.faults.runner.FaultTarget``):
``partition``/``heal`` cut a site off the lab's WAN (e.g. the computes' site during boots) and
reconnect it; ``set_wan`` changes every pair's delay/jitter/loss on top of the run's uniform
delay (None restores it); ``kill``/``restart`` act on ``nova-compute`` (every compute process
of the site), ``rabbitmq`` or the database (its kind: ``mariadb``, ``galera``). nova's
control-plane processes have no restart here: killing them would end the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from juice.errors import UserError
from juice.faults.spec import WanChange
from juice.lab.place import Lab

if TYPE_CHECKING:
    from juice.services.base import Service
    from juice.services.openstack.nova_deploy import NovaDeployment


class NovaFaults:
    def __init__(self, lab: Lab, stack: NovaDeployment, delay_ms: float) -> None:
        self.lab, self.stack, self.delay_ms = lab, stack, delay_ms

    def partition(self, site: int) -> None:
        self.lab.partition(site)

    def heal(self, site: int) -> None:
        self.lab.heal(site)

    def set_wan(self, change: WanChange | None) -> None:
        from juice.lab import spec as labspec

        data: dict[str, object] = {"name": self.lab.name, "sites": len(self.lab.sites),
                                "delay_ms": self.delay_ms}
        if change is not None:
            data.update({k: v for k, v in change.model_dump().items() if v is not None})
        self.lab.set_wan(labspec.parse(data, "faults.wan"))

    def _service(self, kind: str) -> Service:
        services: dict[str, Service] = {"nova-compute": self.stack.computes, "rabbitmq": self.stack.mq,
                    self.stack.db.kind: self.stack.db}
        if kind not in services:
            raise UserError(f"faults: kill: no {kind!r} server in a nova deployment (choose from "
                            f"{', '.join(services)})")
        return services[kind]

    def kill(self, kind: str, site: int) -> dict[str, object]:
        return self._service(kind).kill(site)

    def restart(self, kind: str, site: int) -> dict[str, object]:
        return self._service(kind).restart(site)
