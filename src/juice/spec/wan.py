"""The WAN axis every lab-based study shares: uniform one-way delays, hierarchical zones, full
matrices. ``Wan`` is the spec part (strict); ``wan_points(wan)`` expands it into ``WanPoint``s,
each of which renders the lab spec of one point of the axis.

Bounds (the shared types of ``juice.spec.base``): every delay is ONE-WAY, 0..10,000 ms (a
geostationary satellite hop is ~300 ms; beyond 10 s, TCP retries and service timeouts fail
runs instead of measuring them); ``jitter_ms`` 0..10,000 ms; ``loss_pct`` 0..100 %; zone
counts 1..250 (the most sites a lab has); a matrix is square, 1..250 sites a side, with 0 on
its diagonal (a site's delay to itself). A value is listed once per axis (a duplicate would be
the same runs twice)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import Field, model_validator

from juice.lab import spec as labspec
from juice.spec.base import JitterMs, OneWayMs, Percent, SiteCount, Strict, no_duplicates
from juice.util.validation import shown


class ZonesPoint(Strict):
    """Hierarchical zones: ``count`` zones of contiguous sites (seed: 3 zones of 3 sites)."""

    count: SiteCount = Field(description="number of zones, 1..250 (at most the sites of the lab)")
    intra_ms: OneWayMs = Field(description="one-way delay between sites of a zone, 0..10,000 ms")
    inter_ms: OneWayMs = Field(description="one-way delay between zones, 0..10,000 ms")


class Wan(Strict):
    """The WAN axis. Each entry of each list is one point of the axis."""

    delay_ms: list[OneWayMs] = Field(default_factory=list,
                                     description="uniform one-way delays, 0..10,000 ms each")
    zones: list[ZonesPoint] = Field(default_factory=list)
    matrices: list[list[list[OneWayMs]]] = Field(
        default_factory=list, description="full one-way matrices (row = from, column = to), "
                                          "0..10,000 ms, 0 on the diagonal")
    jitter_ms: JitterMs = Field(default=0.0, description="std deviation of every delay, 0..10,000 ms")
    loss_pct: Percent = Field(default=0.0, description="packet loss of every delayed link, 0..100 %")

    @model_validator(mode="after")
    def _some(self) -> Wan:
        if not (self.delay_ms or self.zones or self.matrices):
            raise ValueError("give at least one point: delay_ms: [0], zones: [...] or matrices: [...]")
        try:
            no_duplicates(self.delay_ms)
        except ValueError as e:
            raise ValueError(f"delay_ms.{e}") from None
        labels = [(z.count, z.intra_ms, z.inter_ms) for z in self.zones]
        for i, z in enumerate(labels):
            if z in labels[:i]:
                raise ValueError(f"zones.{i}: the same zones as zones.{labels.index(z)}; each point once")
        for i, m in enumerate(self.matrices):
            n = len(m)
            if n < 1:
                raise ValueError(f"matrices.{i}: empty matrix; give one row per site")
            for r, row in enumerate(m):
                if len(row) != n:
                    raise ValueError(f"matrices.{i}.{r}: has {len(row)} columns, expected {n} "
                                     f"(a matrix is square: one row and one column per site)")
                if row[r] != 0:
                    raise ValueError(f"matrices.{i}.{r}.{r}: the delay of site {r + 1} to itself "
                                     f"must be 0, got {row[r]:g}")
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
        data: dict[str, object] = {"name": name, "sites": sites, "jitter_ms": jitter_ms, "loss_pct": loss_pct}
        if self.delay_ms is not None:
            data["delay_ms"] = self.delay_ms
        elif self.zones is not None:
            count, intra, inter = self.zones
            data.update(zones=labspec.even_zones(sites, count), intra_zone_delay_ms=intra,
                        inter_zone_delay_ms=inter)
        elif self.matrix is not None:
            data["matrix"] = [list(r) for r in self.matrix]
        return labspec.parse(data, "wan")

    def params(self) -> dict[str, float | str | None]:
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


def uniform_delays(data: object, study: str, *, into: str = "delay_ms", single: bool = False,
                   max_ms: float = 500.0) -> object:
    """``wan: {delay_ms: [...]}``, the section every study's spec accepts, for a study whose WAN
    is uniform one-way delays only: checked here (each a number 0..``max_ms``, no repeats: the
    errors name ``wan.delay_ms``), then moved to the study's own field ``into`` (a dotted path;
    its older spelling, still accepted alone) before validation, so run keys do not change.
    ``single``: the study runs at one delay (a one-element list). ValueError (one line naming
    the field) on anything else."""
    if not isinstance(data, dict) or "wan" not in data:
        return data
    wan = data["wan"]
    if not isinstance(wan, dict) or "delay_ms" not in wan:
        raise ValueError("wan: expected a mapping like {delay_ms: [0, 25]} (one-way delays, ms)")
    extra = sorted(set(wan) - {"delay_ms"})
    if extra:
        raise ValueError(f"wan.{extra[0]}: the {study} study takes uniform one-way delays only "
                         "(wan.delay_ms)")
    delays = wan["delay_ms"]
    _check_delays(delays, max_ms)
    if single:
        if not isinstance(delays, list) or len(delays) != 1:
            raise ValueError(f"wan.delay_ms: the {study} study runs at one delay: give one, like [10]")
        delays = delays[0]
    out: dict[str, object] = {k: v for k, v in data.items() if k != "wan"}
    *parents, leaf = into.split(".")
    node = out
    for p in parents:
        child = node.get(p, {})
        if not isinstance(child, dict):
            raise ValueError(f"{p}: expected a mapping")
        node[p] = child = dict(child)
        node = child
    if leaf in node:
        raise ValueError(f"{into}: the delays are given twice: keep wan.delay_ms "
                         f"({into} is the older spelling)")
    node[leaf] = delays
    return out


def _check_delays(delays: object, max_ms: float) -> None:
    """ValueError naming ``wan.delay_ms`` (and the item) unless ``delays`` is a number or a
    non-empty list of distinct numbers, each 0..``max_ms`` one-way ms."""
    items = delays if isinstance(delays, list) else [delays]
    if not items:
        raise ValueError("wan.delay_ms: give at least one one-way delay in ms, like [0, 25]")
    seen: set[float] = set()
    for i, d in enumerate(items):
        where = f"wan.delay_ms.{i}" if isinstance(delays, list) else "wan.delay_ms"
        if isinstance(d, bool) or not isinstance(d, int | float):
            raise ValueError(f"{where}: expected a number (one-way ms), got {shown(d)}")
        if not math.isfinite(d) or not 0 <= d <= max_ms:
            raise ValueError(f"{where}: expected 0..{max_ms:g} ms one-way, got {shown(d)}")
        if float(d) in seen:
            raise ValueError(f"{where}: {d:g} ms is listed twice")
        seen.add(float(d))
