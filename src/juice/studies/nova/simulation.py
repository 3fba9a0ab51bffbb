"""SIMULATED waiting times and injected failures of the nova study (issue 28): what the spec
accepts, what the deployment gets and what the manifest and the report state.

    computes: {..., spawn_time: {dist: lognormal, median_s: 20, sigma: 1, cap_s: 600}}
    fakes: {image_fetch_s: {dist: constant, value_s: 0.5}}
    failures: {spawn: 0.01, image_fetch: 0.02}                        # probabilities 0..1

``port_create`` (``fakes.port_create_s``, ``failures.port_create``) is fake-neutron's answer to
``POST /v2.0/ports``; the spec refuses it while the lab's boots use ``networks: none`` (nova
creates no port: nothing would wait).

Distributions and draws are ``juice.services.openstack.simwait`` (the same file runs in the fake driver
and the fake servers). ``seed`` of a distribution defaults to the spec's ``seed``.
"""

from __future__ import annotations

from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import Field

from juice.services.openstack import simwait
from juice.services.openstack.nova_conf import WAIT_DOC, Wait
from juice.spec.base import FiniteFloat, Strict

KINDS = {"spawn": "spawn_time", "image_fetch": "image_fetch_s", "port_create": "port_create_s"}
WHERE = {"spawn": "the fake virt driver's spawn (the build slot held)",
         "image_fetch": "fake-glance's image GET (nova-api, per boot)",
         "port_create": "fake-neutron's POST /v2.0/ports"}


Probability = Annotated[FiniteFloat, Ge(0), Le(1)]


class Fakes(Strict):
    image_fetch_s: Wait | None = Field(default=None, description="fake-glance's answer to the image "
                                       "GET, " + WAIT_DOC)
    port_create_s: Wait | None = Field(default=None, description="fake-neutron's answer to a port "
                                       "creation (POST /v2.0/ports; refused in the lab while boots use "
                                       "networks: none: nova creates no port), " + WAIT_DOC)


class Failures(Strict):
    spawn: Probability = Field(default=0.0, description="SIMULATED: a spawn fails (after its wait), "
                               "per (instance, node): nova reschedules as for failing_nodes")
    image_fetch: Probability = Field(default=0.0, description="SIMULATED: fake-glance answers 503")
    port_create: Probability = Field(default=0.0, description="SIMULATED: fake-neutron answers 500")


def _seeded(d: dict[str, Any] | None, seed: int) -> dict[str, Any] | None:
    return None if d is None else {**d, "seed": d.get("seed", seed)}


def record(spawn_time: dict[str, Any] | None, fakes: Fakes, failures: Failures,
           seed: int) -> dict[str, Any]:
    """The manifest's ``simulation`` entry ({} when nothing is simulated): per stage its wait
    (the distribution, with its seed) and its failure probability."""
    waits = {"spawn": _seeded(spawn_time, seed), "image_fetch": _seeded(fakes.image_fetch_s, seed),
             "port_create": _seeded(fakes.port_create_s, seed)}
    out = {stage: {"wait_s": waits[stage], "failure": getattr(failures, stage), "where": WHERE[stage]}
           for stage in KINDS if waits[stage] is not None or getattr(failures, stage)}
    return {"stages": out, "note": "simulated: not measured; drawn per instance / request"} if out else {}


def fake_simulation(fakes: Fakes, failures: Failures, seed: int) -> dict[str, dict[str, Any]]:
    """What ``FakeServices(simulation=...)`` takes: per fake its wait, failure and seed."""
    out: dict[str, dict[str, Any]] = {}
    for kind, stage, wait in (("glance", "image_fetch", fakes.image_fetch_s),
                              ("neutron", "port_create", fakes.port_create_s)):
        p = getattr(failures, stage)
        if wait is not None or p:
            out[kind] = {"wait": wait, "failure": p, "seed": (wait or {}).get("seed", seed)}
    return out


def lines(sim: dict[str, Any]) -> list[str]:
    """The report's provenance lines for a manifest's ``simulation`` entry (older runs: none)."""
    out = []
    for stage, v in (sim or {}).get("stages", {}).items():
        wait = simwait.describe(v["wait_s"]) if v.get("wait_s") else "no wait"
        fail = f", failure probability {v['failure']:g}" if v.get("failure") else ""
        out.append(f"{stage} — SIMULATED: {wait}{fail} ({v.get('where', '')})")
    return out
