"""The Keystone study's hands for a fault schedule (``juice.faults.runner.FaultTarget``).

``partition``/``heal`` cut a site off the lab's WAN and reconnect it; ``set_wan`` applies a
change (delay, jitter, loss for every pair) on top of the run's WAN point and restores that
point with None; ``kill``/``restart`` act on the deployment's servers by kind: the database's
(``galera``, ``mariadb``, ``postgres`` ... whatever ``db.kind`` is), ``keystone`` and
``memcached`` (Keystone's cache, one per site).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from juice.errors import UserError
from juice.faults.spec import WanChange
from juice.lab.place import Lab
from juice.services.base import Service
from juice.spec.wan import WanPoint

if TYPE_CHECKING:
    from juice.services.openstack.keystone import Keystone


KINDS_HINT = "the database's kind, keystone or memcached"


class KeystoneFaults:
    """A FaultTarget over one Keystone deployment at one WAN point."""

    def __init__(self, lab: Lab, db: Service, ks: Keystone, wan: WanPoint, jitter_ms: float,
                 loss_pct: float) -> None:
        self.lab, self.db, self.ks = lab, db, ks
        self.wan, self.jitter_ms, self.loss_pct = wan, jitter_ms, loss_pct

    def partition(self, site: int) -> None:
        self.lab.partition(site)

    def heal(self, site: int) -> None:
        self.lab.heal(site)

    def set_wan(self, change: WanChange | None) -> None:
        base = self.wan.lab_spec(self.lab.name, len(self.lab.sites), self.jitter_ms, self.loss_pct)
        if change is None:
            self.lab.set_wan(base)
            return
        data = base.model_dump(mode="json")
        if change.delay_ms is not None:
            for k in ("matrix", "zones", "intra_zone_delay_ms", "inter_zone_delay_ms", "pairs"):
                data.pop(k, None)
            data["delay_ms"] = change.delay_ms
        if change.jitter_ms is not None:
            data["jitter_ms"] = change.jitter_ms
        if change.loss_pct is not None:
            data["loss_pct"] = change.loss_pct
        self.lab.set_wan(type(base).model_validate(data))

    def _service(self, kind: str) -> Service:
        if kind == self.db.kind:
            return self.db
        if kind == "keystone":
            return self.ks
        if kind == "memcached" and self.ks.memcached is not None:
            return self.ks.memcached
        kinds = [self.db.kind, "keystone", *(["memcached"] if self.ks.memcached else [])]
        raise UserError(f"faults: kill: no {kind!r} server in this deployment ({KINDS_HINT}: "
                        f"{', '.join(kinds)})")

    def kill(self, kind: str, site: int) -> dict[str, Any]:
        return self._service(kind).kill(site)

    def restart(self, kind: str, site: int) -> dict[str, Any]:
        return self._service(kind).restart(site)
