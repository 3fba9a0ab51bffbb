"""Each site's clock against Juice's, as measured at a run's start, for correcting times taken
on different hosts.

    clocks = of_run(lab, running_profile)     # the runner: given to the study as ``run.clocks``
    clocks.of(site)                           # (offset_s, bound_s) or None (not measured)
    Clocks.from_profile(manifest["profile"])  # the same, read back from a stored run

``offset_s`` is the site's clock minus Juice's (``juice.profile.hosts`` probes each host's clock
at the start of every run: offset of the probe of least RTT, within +- RTT/2, so ``bound_s`` =
RTT/2); a time ``t`` read on site k's clock is ``t - offset_s`` on Juice's clock, within
``bound_s`` (the drift during a run is not corrected). A difference of two times taken at the
same site needs no correction and is exact; a difference across sites k and j is corrected by
both offsets and uncertain by ``bound_s(k) + bound_s(j)``.

A local lab (namespaces on this machine) has one clock: ``one_clock``, every offset 0, exact.
A lab on hosts whose clocks were not measured (the profile disabled, a host that could not be
sampled) has no offset for them: ``of`` says None, and the caller withholds what needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Clocks:
    offsets: Mapping[int, tuple[float, float]] = field(default_factory=dict)  # site -> (offset_s, bound_s)
    one_clock: bool = False  # every site on this machine's clock (a local lab)

    def of(self, site: int) -> tuple[float, float] | None:
        """(offset_s, bound_s) of ``site``'s clock; None when it was not measured."""
        if self.one_clock:
            return (0.0, 0.0)
        return self.offsets.get(int(site))

    def to_dict(self) -> dict[str, Any]:
        return {"one_clock": self.one_clock,
                "offsets": {str(k): {"offset_s": round(o, 6), "bound_s": round(b, 6)}
                            for k, (o, b) in sorted(self.offsets.items())}}

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any] | None) -> Clocks | None:
        """From a manifest's ``profile`` entry: its ``clock_offsets`` (hosts; bound = RTT/2), one
        clock for a profile of this machine (``source`` not "hosts"), None without a profile."""
        if not isinstance(profile, Mapping):
            return None
        offs = profile.get("clock_offsets")
        if not isinstance(offs, Mapping):
            return cls(one_clock=True) if profile.get("source") != "hosts" else cls()
        out: dict[int, tuple[float, float]] = {}
        for k, v in offs.items():
            if isinstance(v, Mapping) and v.get("offset_s") is not None and v.get("rtt_s") is not None:
                out[int(k)] = (float(v["offset_s"]), float(v["rtt_s"]) / 2)
        return cls(out)


def of_run(lab: Any, running: Any) -> Clocks | None:
    """The clocks of a run in ``lab`` (None: no lab) from its started profile ``running``
    (``juice.profile.sampler.start``'s result, None when not profiled): one clock for a lab
    of namespaces here, the hosts' measured offsets for a lab on hosts (none without a profile)."""
    if lab is None:
        return None
    if lab.local_namespaces() is not None:  # this machine sees the sites: one clock
        return Clocks(one_clock=True)
    out: dict[int, tuple[float, float]] = {}
    for h in getattr(running, "hosts", None) or []:
        off, rtt = getattr(h, "offset_s", None), getattr(h, "rtt_s", None)
        if off is not None and rtt is not None:
            out[int(h.site)] = (float(off), float(rtt) / 2)
    return Clocks(out)
