"""Open the lab a study's points share: network namespaces on this machine, or the hosts of a
spec's ``provider:`` section (static SSH hosts, Grid'5000 or Vagrant through EnOSlib), behind
the one ``juice.lab.place.Lab`` interface. Every study opens its labs here, so adding
``provider:`` to a spec moves the same study onto hosts.

    ls = uniform_spec("msg", sites=3, delay_ms=25)        # the WAN: one delay between every pair
    with open_lab(spec.provider, ls, progress) as lab:     # LocalLab or RemoteLab
        lab.place(2), lab.set_wan(...), lab.partition(3) ...
    # removed on exit (namespaces, or everything Juice put on the hosts; a reservation is
    # released unless provider.keep)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from juice.lab import spec as labspec
from juice.lab.local import LocalLab
from juice.lab.place import Lab
from juice.lab.provider import Provider, reserve
from juice.paths import work_dir

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def uniform_spec(prefix: str, sites: int, delay_ms: float) -> labspec.LabSpec:
    """A lab ``<prefix><pid>`` of ``sites`` sites, ``delay_ms`` one-way between every pair."""
    return labspec.parse({"name": f"{prefix}{os.getpid() % 100000}", "sites": sites, "delay_ms": delay_ms})


def where(provider: Provider) -> str:
    """A few words for progress lines: "namespaces here", "3 static hosts", "g5k"."""
    if provider.kind == "local":
        return "namespaces here"
    if provider.static is not None:
        return f"static hosts ({len(provider.static.hosts)} listed)"
    return "g5k" if provider.g5k is not None else "vagrant"


@contextmanager
def open_lab(provider: Provider, spec: labspec.LabSpec, progress: Progress = _quiet) -> Iterator[Lab]:
    """The lab of ``spec`` where ``provider`` says, for the duration of the block."""
    progress(f"lab {spec.name}: {spec.sites} sites, {where(provider)}")
    if provider.kind == "local":
        with LocalLab.up(spec, ephemeral=True, progress=progress) as local:
            yield local
        return
    from juice.lab.remote import RemoteLab

    with reserve(provider, spec.sites, work_dir() / spec.name, progress) as hosts, \
            RemoteLab.up(spec, hosts, netem=provider.netem, progress=progress) as remote:
        yield remote


def plan(provider: Provider, spec: labspec.LabSpec,
         roles: Mapping[int, Sequence[str]] | None = None) -> list[str]:
    """``--dry-run`` lines for a lab on hosts: the provider (EnOSlib configuration or the host
    list), site -> host with ``roles`` (what the study runs there), the WAN commands per host.
    Nothing is reserved or contacted."""
    from juice.lab.provider import render_plan

    lk = labspec.links(spec)
    n = spec.sites
    matrix = [[0.0 if a == b else lk[(a, b)].delay_ms for b in range(1, n + 1)] for a in range(1, n + 1)]
    return render_plan(provider, n, matrix, spec.jitter_ms or 0.0, spec.loss_pct or 0.0, roles).splitlines()
