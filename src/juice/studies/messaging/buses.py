"""The bus of a point: which server objects, the URL agents in each site use, the oslo.config
file they read, the bus's own counters, and the hands of a fault schedule.

    bus = build(lab, spec_bus, progress)      # a Service, nothing started
    bus.up(timeout)                           # (the study's deployment does it)
    url_for(bus, site)                        # "rabbit://...", "nats://..."
    conf_text(spec_bus, timeout_s)            # [DEFAULT] + [oslo_messaging_rabbit] options
    MessagingFaults(lab, bus, delay_ms)       # a juice.faults.runner.FaultTarget
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from juice.contract import Progress
from juice.errors import UserError
from juice.faults.spec import WanChange
from juice.lab import spec as labspec
from juice.lab.place import Lab
from juice.services.base import Service
from juice.studies.messaging.spec import Bus

# [oslo_messaging_rabbit] options per queue flavour (oslo.messaging 18.3.1 option names).
FLAVOUR_OPTIONS: dict[str, dict[str, str]] = {
    "classic": {},
    "mirrored": {},   # a broker policy (ha-mode: all), see juice.services.buses.rabbitmq
    "quorum": {"rabbit_quorum_queue": "true"},
    "quorum-transient": {"rabbit_quorum_queue": "true", "rabbit_transient_quorum_queue": "true"},
    "queue-manager": {"use_queue_manager": "true"},
    "stream-fanout": {"rabbit_quorum_queue": "true", "rabbit_transient_quorum_queue": "true",
                      "rabbit_stream_fanout": "true", "rabbit_qos_prefetch_count": "10"},
    "recommended": {"rabbit_quorum_queue": "true", "rabbit_transient_quorum_queue": "true",
                    "use_queue_manager": "true", "rabbit_stream_fanout": "true",
                    "rabbit_qos_prefetch_count": "10"},
}


def node_sites(bus: Bus, sites: int) -> list[int]:
    """Sites of a RabbitMQ cluster's nodes: site 1, 2, ... round robin (1 node: site 1)."""
    return [i % sites + 1 for i in range(bus.nodes)]


def build(lab: Lab, bus: Bus, progress: Progress, topics: Sequence[str] = ()) -> Service:
    """The bus's service (nothing started). ``topics``: the shared topics the deployment's runs
    use, which a federated mesh must declare on every broker (see rabbitmq_federation)."""
    sites = len(lab.sites)
    broker_flavour = "mirrored" if bus.queues == "mirrored" else \
        "quorum" if "rabbit_quorum_queue" in FLAVOUR_OPTIONS[bus.queues] else "classic"
    if bus.kind == "rabbitmq":
        from juice.services.buses.rabbitmq import RabbitMQ

        return RabbitMQ(lab, progress, nodes=node_sites(bus, sites), cluster=True, queues=broker_flavour)
    if bus.kind == "rabbitmq-federation":
        from juice.services.buses.rabbitmq_federation import RabbitFederation

        fed: Service = RabbitFederation(lab, progress, sites=list(lab.sites), topics=list(topics),
                                        queues=broker_flavour)
        return fed
    if bus.kind == "nats":
        from juice.services.buses.nats import Nats

        return Nats(lab, progress, sites=list(lab.sites), topology=bus.topology)
    raise UserError(f"buses: unknown kind {bus.kind!r}")


def url_for(svc: Any, site: int) -> str:
    """The transport URL an agent in ``site`` uses. RabbitMQ cluster: every node, as OpenStack
    deployments list them -- oslo.messaging's rabbit driver SHUFFLES a multi-host URL, so each
    connection goes to a random node (own site's first is not honoured) and a shared queue
    lives on whichever node its first server reached (``counters()["shared_queues"]`` says
    which; tc5 records it per kill). NATS cluster: the site's own server first (Juice's
    transport keeps the order), the others for reconnects; gateways, federation: the site's
    own server only."""
    kind = svc.kind
    if kind == "rabbitmq":
        return str(svc.urls_all(site))
    if kind == "nats":
        urls = [svc.url(site), *[svc.url(s) for s in svc.server_sites if s != site]] \
            if svc.topology == "cluster" else [svc.url(site)]
        return "nats://" + ",".join(u.removeprefix("nats://").rstrip("/") for u in urls) + "/"
    return str(svc.url(site))


def conf_text(bus: Bus, timeout_s: float, threads_per_server: int = 4) -> str:
    """The oslo.config file every agent reads."""
    lines = ["[DEFAULT]", f"executor_thread_pool_size = {threads_per_server}",
             f"rpc_response_timeout = {int(timeout_s)}", "", "[oslo_messaging_rabbit]"]
    lines += [f"{k} = {v}" for k, v in FLAVOUR_OPTIONS[bus.queues].items()]
    return "\n".join(lines) + "\n"


def counters(svc: Any) -> Any:
    """The bus's own counters (queues, connections, messages / NATS routes, subscriptions);
    an error is data too."""
    try:
        return svc.counters()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


class MessagingFaults:
    """A FaultTarget over a bus deployment in a lab at one one-way delay."""

    def __init__(self, lab: Lab, bus: Service, delay_ms: float) -> None:
        self.lab, self.bus, self.delay_ms = lab, bus, delay_ms

    def _wan(self, delay_ms: float, jitter_ms: float = 0.0, loss_pct: float = 0.0) -> labspec.LabSpec:
        return labspec.parse({"name": self.lab.name, "sites": len(self.lab.sites),
                              "delay_ms": delay_ms, "jitter_ms": jitter_ms, "loss_pct": loss_pct})

    def partition(self, site: int) -> None:
        self.lab.partition(site)

    def heal(self, site: int) -> None:
        self.lab.heal(site)

    def set_wan(self, change: WanChange | None) -> None:
        if change is None:
            self.lab.set_wan(self._wan(self.delay_ms))
            return
        self.lab.set_wan(self._wan(change.delay_ms if change.delay_ms is not None else self.delay_ms,
                                   change.jitter_ms or 0.0, change.loss_pct or 0.0))

    def _check(self, kind: str) -> Service:
        if kind != self.bus.kind:
            raise UserError(f"faults.kill: this point's bus is {self.bus.kind!r}, not {kind!r}")
        return self.bus

    def kill(self, kind: str, site: int) -> dict[str, object]:
        return dict(self._check(kind).kill(site))

    def restart(self, kind: str, site: int) -> dict[str, object]:
        return dict(self._check(kind).restart(site))
