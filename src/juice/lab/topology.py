"""Names and addresses of a local lab (pure: no side effects).

A lab called ``lab`` with N sites is N+1 network namespaces::

    juice-lab-s1 (10.210.1.2) ─┐
    juice-lab-s2 (10.210.2.2) ─┼─ juice-lab-core (10.210.k.1 on veth "s<k>"), routes and delays
    juice-lab-sN (10.210.N.2) ─┘

Each site is its own /24; the site number is the third byte of every address in it, which
is what the WAN delayer reads from packets. Namespaces are isolated, so two labs may reuse
the same addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PREFIX = "juice-"
SUBNET_BASE = "10.210"
SITE_OCTET = 2  # 0-based index of the address byte that numbers the site
SITE_IFACE = "wan0"  # the site's interface towards the core


@dataclass(frozen=True)
class Topology:
    """Namespace names and addresses for lab ``name`` with ``sites`` sites."""

    name: str
    sites: int

    @property
    def core_ns(self) -> str:
        return f"{NS_PREFIX}{self.name}-core"

    def site_ns(self, site: int) -> str:
        self._check(site)
        return f"{NS_PREFIX}{self.name}-s{site}"

    def site_ip(self, site: int) -> str:
        """The address services in ``site`` listen on."""
        self._check(site)
        return f"{SUBNET_BASE}.{site}.2"

    def gateway_ip(self, site: int) -> str:
        """The core's address on the link to ``site``."""
        self._check(site)
        return f"{SUBNET_BASE}.{site}.1"

    def subnet(self, site: int) -> str:
        self._check(site)
        return f"{SUBNET_BASE}.{site}.0/24"

    @staticmethod
    def core_iface(site: int) -> str:
        """The core's veth towards ``site`` (the egress of packets to that site)."""
        return f"s{site}"

    def namespaces(self) -> list[str]:
        """Every namespace of the lab, core first."""
        return [self.core_ns] + [self.site_ns(s) for s in range(1, self.sites + 1)]

    def site_range(self) -> range:
        return range(1, self.sites + 1)

    def _check(self, site: int) -> None:
        if not 1 <= site <= self.sites:
            from juice.errors import UserError

            raise UserError(f"site: unknown site {site} (lab {self.name!r} has sites 1..{self.sites})")
