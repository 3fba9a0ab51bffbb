"""The production shape of the nova study's control plane (docs/topology.md): haproxy in front
of Keystone, placement and nova-api; several control sites; N Keystones; a RabbitMQ cluster.

    haproxy: {maxconn: [4000, 16000]}     # on; an axis: haproxy's GLOBAL maxconn (seed 002)
    topology:
      control_sites: [1, 2, 3]            # the control plane spread over these sites
      keystones: 3                        # one Keystone per control site, in order
      rabbitmq_nodes: 3                   # 1 | 3 | 5 broker nodes, one cluster, round-robin
      placements: 3                       # placement servers, one per control site (haproxy)

With ``control_sites`` [a, b, c]: nova-api and haproxy in a, nova-conductor in b, placement in
c (each cycling when fewer sites are given), the schedulers round-robin over them, the
Keystones in the first ``keystones`` of them. With ``db: galera`` and ``galera_writers: multi``
every role writes through its own site's Galera node (three writers with three control sites).
Unset, the shape is the seed deployment's: everything in ``controllers_site``, one Keystone,
one RabbitMQ node, no load balancer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from annotated_types import Ge, Le
from pydantic import Field, field_validator

from juice.spec.base import PositiveInt, Strict, no_duplicates

if TYPE_CHECKING:
    from juice.services.openstack.nova_deploy import NovaStack

MAXCONN_MAX = 1_000_000


class HAProxyOptions(Strict):
    """``haproxy:`` present = haproxy on (Debian's package) in front of Keystone, placement and
    nova-api, one frontend each, every instance behind it."""

    maxconn: list[Annotated[PositiveInt, Le(MAXCONN_MAX)]] = Field(
        default_factory=list, description=(
            "an axis: haproxy's global maxconn (process-wide concurrent connections; seed 002 raised "
            "it from 4,000 to 16,000); empty: haproxy's default, derived from the fd limit"))
    site: Annotated[int, Ge(1), Le(9)] | None = Field(default=None, description=(
        "haproxy's site (default: the first control site)"))

    @field_validator("maxconn", mode="before")
    @classmethod
    def _listify(cls, v: object) -> object:
        return [v] if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("maxconn")
    @classmethod
    def _once(cls, v: list[int]) -> list[int]:
        no_duplicates(v)
        return v

    def axis(self) -> list[int | None]:
        return list(self.maxconn) or [None]


class Topology(Strict):
    control_sites: list[Annotated[int, Ge(1), Le(9)]] | None = Field(
        default=None, min_length=1, max_length=9, description=(
            "the sites the control plane spreads over (api+haproxy, conductor, placement; schedulers "
            "round-robin; Keystones); default [controllers_site]"))
    keystones: Annotated[PositiveInt, Le(9)] = Field(default=1, description=(
        "Keystone servers, one per control site (in order), behind haproxy when it is on"))
    rabbitmq_nodes: Literal[1, 3, 5] = Field(default=1, description=(
        "RabbitMQ nodes in one cluster, round-robin over the control sites; nova's transport_url "
        "lists every node"))
    placements: Annotated[PositiveInt, Le(9)] = Field(default=1, description=(
        "placement servers, one per control site from placement's (cycling), behind haproxy; with "
        "galera_writers multi each writes through its own site's node (seed 004's shape)"))

    @field_validator("control_sites")
    @classmethod
    def _once(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            no_duplicates(v)
        return v

    def set(self) -> dict[str, Any]:
        """What the spec set (the run key's ``topology``: {} for the seed shape)."""
        return self.model_dump(exclude_defaults=True)


def check(topology: Topology, haproxy: HAProxyOptions | None, sites: int, controllers_site: int) -> None:
    """ValueError (one line, naming the field) when the shape does not fit the lab."""
    ctl = topology.control_sites or [controllers_site]
    bad = [k for k in ctl if k > sites]
    if bad:
        raise ValueError(f"topology.control_sites: {bad[0]} is not a site (sites: {sites}; choose "
                         f"1..{sites} or more sites)")
    if topology.keystones > len(ctl):
        raise ValueError(f"topology.keystones: {topology.keystones} Keystones need as many control sites "
                         f"(one per site; topology.control_sites has {len(ctl)}): list more "
                         "control_sites or fewer keystones")
    if topology.placements > len(ctl):
        raise ValueError(f"topology.placements: {topology.placements} placement servers need as many control "
                         f"sites (one per site; topology.control_sites has {len(ctl)})")
    if topology.placements > 1 and haproxy is None:
        raise ValueError("topology.placements: several placement servers need haproxy in front: add "
                         "`haproxy: {}`")
    if haproxy is not None and haproxy.site is not None and haproxy.site > sites:
        raise ValueError(f"haproxy.site: {haproxy.site} is not a site (sites: {sites})")


def stack_shape(stack: NovaStack, topology: Topology, haproxy: HAProxyOptions | None,
                schedulers: int, maxconn: int | None) -> NovaStack:
    """``stack`` laid out in this shape: Keystones, RabbitMQ nodes, placements and nova's roles
    over the control sites (default: ``stack``'s control site), haproxy in front when on."""
    from dataclasses import replace

    from juice.services.openstack.nova_conf import spread

    ctl = list(topology.control_sites or [stack.nova.control_site])
    home = ctl[0]
    nova = replace(stack.nova, control_site=home, api_site=home, conductor_site=ctl[1 % len(ctl)],
                   scheduler_sites=spread(schedulers, ctl) if len(ctl) > 1 else None)
    on = haproxy is not None  # one replace: the stack checks its placements against haproxy
    return replace(stack, keystone_site=home, keystone_sites=tuple(ctl[:topology.keystones]),
                   bus_sites=spread(topology.rabbitmq_nodes, ctl), placement_site=ctl[2 % len(ctl)],
                   placement_sites=tuple(ctl[(2 + i) % len(ctl)] for i in range(topology.placements)),
                   fakes_site=home, nova=nova, haproxy=on or stack.haproxy,
                   haproxy_site=(haproxy.site or home) if haproxy is not None else stack.haproxy_site,
                   haproxy_maxconn=maxconn if on else stack.haproxy_maxconn)
