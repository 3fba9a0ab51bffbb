"""The WAN axis every lab-based study shares: uniform one-way delays, hierarchical zones, full
matrices. ``Wan`` is the spec part (strict); ``wan_points(wan)`` expands it into ``WanPoint``s,
each of which renders the lab spec of one point of the axis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator, model_validator

from juice.lab import spec as labspec
from juice.spec.base import Strict


class ZonesPoint(Strict):
    """Hierarchical zones: ``count`` zones of contiguous sites (seed: 3 zones of 3 sites)."""

    count: int = Field(ge=1)
    intra_ms: float = Field(ge=0, description="one-way delay between sites of a zone")
    inter_ms: float = Field(ge=0, description="one-way delay between zones")


class Wan(Strict):
    """The WAN axis. Each entry of each list is one point of the axis."""

    delay_ms: list[float] = Field(default_factory=list)
    zones: list[ZonesPoint] = Field(default_factory=list)
    matrices: list[list[list[float]]] = Field(default_factory=list)
    jitter_ms: float = Field(default=0.0, ge=0)
    loss_pct: float = Field(default=0.0, ge=0, le=100)

    @field_validator("delay_ms")
    @classmethod
    def _non_negative(cls, v: list[float]) -> list[float]:
        for d in v:
            if d < 0:
                raise ValueError(f"one-way delay must be >= 0 ms, got {d:g}")
        return v

    @model_validator(mode="after")
    def _some(self) -> Wan:
        if not (self.delay_ms or self.zones or self.matrices):
            raise ValueError("give at least one point: delay_ms: [0], zones: [...] or matrices: [...]")
        return self



@dataclass(frozen=True)
class WanPoint:
    """One point of the WAN axis. ``delay_ms`` is the uniform ONE-WAY delay (None for zones
    and matrices); ``label`` names the point (run keys, directory names); the ``wan`` param
    is its kind (uniform, zones, matrixN) so a delay sweep varies ``delay_ms`` only."""

    label: str
    delay_ms: float | None = None
    zones: tuple[int, float, float] | None = None  # (count, intra_ms, inter_ms)
    matrix: tuple[tuple[float, ...], ...] | None = None

    def lab_spec(self, name: str, sites: int, jitter_ms: float, loss_pct: float) -> labspec.LabSpec:
        data: dict[str, Any] = {"name": name, "sites": sites, "jitter_ms": jitter_ms, "loss_pct": loss_pct}
        if self.delay_ms is not None:
            data["delay_ms"] = self.delay_ms
        elif self.zones is not None:
            count, intra, inter = self.zones
            data.update(zones=labspec.even_zones(sites, count), intra_zone_delay_ms=intra,
                        inter_zone_delay_ms=inter)
        elif self.matrix is not None:
            data["matrix"] = [list(r) for r in self.matrix]
        return labspec.parse(data, "wan")

    def params(self) -> dict[str, Any]:
        zones = None
        if self.zones is not None:
            zones = f"{self.zones[0]} zones, {self.zones[1]:g}/{self.zones[2]:g} ms"
        kind = "uniform" if self.delay_ms is not None else "zones" if self.zones else self.label
        return {"delay_ms": self.delay_ms, "wan": kind, "zones": zones}


def wan_points(wan: Wan) -> list[WanPoint]:
    """The points of the axis, in order: delays, then zones, then matrices."""
    pts = [WanPoint(label=f"{d:g}ms", delay_ms=d) for d in wan.delay_ms]
    pts += [WanPoint(label=f"zones{z.count}-{z.intra_ms:g}-{z.inter_ms:g}ms",
                     zones=(z.count, z.intra_ms, z.inter_ms)) for z in wan.zones]
    pts += [WanPoint(label=f"matrix{i + 1}", matrix=tuple(tuple(r) for r in m))
            for i, m in enumerate(wan.matrices)]
    return pts
