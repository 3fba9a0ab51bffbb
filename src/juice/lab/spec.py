"""The lab spec: how many sites and the WAN between them (delays are ONE-WAY, in ms).

Three ways to state the WAN, plus per-pair overrides:

- uniform: ``delay_ms`` for every ordered pair of sites;
- hierarchical zones: ``zones`` maps a zone name to its sites, with ``intra_zone_delay_ms``
  between sites of a zone and ``inter_zone_delay_ms`` between zones (the seed study's
  "hierarchical" model: e.g. 3 zones of 3 sites, 10 ms inside, 75 ms between);
- an explicit ``matrix``: row = source site, column = destination site, one-way ms.

``pairs`` then overrides single links (symmetric unless ``directed: true``).
``jitter_ms`` (standard deviation) and ``loss_pct`` apply to every delayed pair unless a pair
overrides them. Unknown keys are rejected with the field named.

Bounds (the shared types of ``juice.spec.base``; no NaN or infinity, no bool or string for a
number): ``sites`` 1..250 (one /24 and one namespace per site); every delay ONE-WAY 0..10,000
ms (the longest real paths are ~300 ms one-way, a geostationary satellite hop; beyond 10 s,
TCP retries and service timeouts fail runs instead of measuring them); ``jitter_ms``
0..10,000 ms; ``loss_pct`` 0..100 %; a ``matrix`` is sites x sites with 0 on its diagonal;
zone names follow the spec name pattern (letters, digits, ``_.-``, at most 64).

Example (``lab.yaml``)::

    name: edge
    sites: 9
    zones: {Z1: [1, 2, 3], Z2: [4, 5, 6], Z3: [7, 8, 9]}
    intra_zone_delay_ms: 10
    inter_zone_delay_ms: 75
    pairs:
      - {a: 1, b: 9, delay_ms: 150}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from juice.errors import UserError
from juice.spec.base import MAX_SITES as MAX_SITES
from juice.spec.base import (
    NAME_RE,
    JitterMs,
    OneWayMs,
    Percent,
    SiteCount,
    Strict,
    StrictBool,
    StrictStr,
    read_yaml,
)
from juice.util.validation import validate

LAB_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
ZoneName = Annotated[str, StringConstraints(strict=True, pattern=NAME_RE)]


class PairOverride(Strict):
    """One link whose figures differ from the base model."""

    a: SiteCount = Field(description="first site (source when directed), 1..sites")
    b: SiteCount = Field(description="second site (destination when directed), 1..sites")
    delay_ms: OneWayMs | None = Field(default=None, description="one-way delay, 0..10,000 ms")
    jitter_ms: JitterMs | None = Field(default=None, description="std deviation, 0..10,000 ms")
    loss_pct: Percent | None = Field(default=None, description="packet loss, 0..100 %")
    directed: StrictBool = False


class LabSpec(Strict):
    """Sites and WAN of one lab. Validated on construction; see the module doc."""

    name: StrictStr = Field(default="lab", description="1-12 lowercase letters/digits, a letter first")
    sites: SiteCount = Field(description="number of sites, 1..250")
    delay_ms: OneWayMs | None = Field(default=None, description="uniform one-way delay, 0..10,000 ms")
    jitter_ms: JitterMs = Field(default=0.0, description="std deviation of the delay, 0..10,000 ms")
    loss_pct: Percent = Field(default=0.0, description="packet loss, 0..100 %")
    zones: dict[ZoneName, list[SiteCount]] | None = Field(default=None, description="zone -> its sites")
    intra_zone_delay_ms: OneWayMs | None = Field(default=None, description="one-way, 0..10,000 ms")
    inter_zone_delay_ms: OneWayMs | None = Field(default=None, description="one-way, 0..10,000 ms")
    matrix: list[list[OneWayMs]] | None = Field(default=None, description="one-way ms, row = from")
    pairs: list[PairOverride] = Field(default_factory=list)
    backend: StrictStr = Field(default="auto", pattern="^(auto|netem|userspace)$")

    @model_validator(mode="after")
    def _consistent(self) -> LabSpec:
        if not LAB_NAME_RE.match(self.name):
            raise ValueError("name: use 1-12 lowercase letters/digits starting with a letter")
        models = [m for m, on in (("delay_ms", self.delay_ms is not None),
                                  ("zones", self.zones is not None),
                                  ("matrix", self.matrix is not None)) if on]
        if len(models) > 1:
            raise ValueError(f"{' and '.join(models)}: give only one of delay_ms, zones, matrix")
        if self.zones is not None:
            self._check_zones(self.zones)
        elif self.intra_zone_delay_ms is not None or self.inter_zone_delay_ms is not None:
            raise ValueError("intra_zone_delay_ms/inter_zone_delay_ms: only valid with zones")
        if self.matrix is not None:
            self._check_matrix(self.matrix)
        for i, p in enumerate(self.pairs):
            for field in ("a", "b"):
                site = getattr(p, field)
                if site > self.sites:
                    raise ValueError(f"pairs.{i}.{field}: unknown site {site} "
                                     f"(sites are 1..{self.sites})")
            if p.a == p.b:
                raise ValueError(f"pairs.{i}: a and b are the same site {p.a}")
        return self

    def _check_zones(self, zones: dict[str, list[int]]) -> None:
        if self.intra_zone_delay_ms is None or self.inter_zone_delay_ms is None:
            raise ValueError("zones: also give intra_zone_delay_ms and inter_zone_delay_ms")
        seen: dict[int, str] = {}
        for zone, members in zones.items():
            for s in members:
                if not 1 <= s <= self.sites:
                    raise ValueError(f"zones.{zone}: unknown site {s} (sites are 1..{self.sites})")
                if s in seen:
                    raise ValueError(f"zones.{zone}: site {s} is already in zone {seen[s]}")
                seen[s] = zone
        missing = sorted(set(range(1, self.sites + 1)) - set(seen))
        if missing:
            raise ValueError(f"zones: sites {missing} are in no zone")

    def _check_matrix(self, matrix: list[list[float]]) -> None:
        if len(matrix) != self.sites:
            raise ValueError(f"matrix: has {len(matrix)} rows, expected sites={self.sites}")
        for r, row in enumerate(matrix):
            if len(row) != self.sites:
                raise ValueError(f"matrix.{r}: has {len(row)} columns, expected {self.sites}")
            for c, v in enumerate(row):
                if v < 0:
                    raise ValueError(f"matrix.{r}.{c}: negative delay {v}")
            if row[r] != 0:
                raise ValueError(f"matrix.{r}.{r}: the delay of site {r + 1} to itself must be 0, "
                                 f"got {row[r]:g}")

    def zone_of(self) -> dict[int, str]:
        """Site -> zone name (empty without zones)."""
        return {s: z for z, members in (self.zones or {}).items() for s in members}


@dataclass(frozen=True)
class Link:
    """Emulation of one ordered pair of sites (src -> dst). Delay is one-way."""

    src: int
    dst: int
    delay_ms: float
    jitter_ms: float = 0.0
    loss_pct: float = 0.0

    @property
    def emulated(self) -> bool:
        """False for a plain LAN link (nothing to delay, drop or shake)."""
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0


def links(spec: LabSpec) -> dict[tuple[int, int], Link]:
    """Every ordered pair (src, dst), src != dst, with its one-way emulation."""
    zone = spec.zone_of()
    out: dict[tuple[int, int], Link] = {}
    for s in range(1, spec.sites + 1):
        for d in range(1, spec.sites + 1):
            if s == d:
                continue
            if spec.matrix is not None:
                delay = spec.matrix[s - 1][d - 1]
            elif spec.zones is not None:
                inner = zone[s] == zone[d]
                chosen = spec.intra_zone_delay_ms if inner else spec.inter_zone_delay_ms
                delay = float(chosen or 0.0)
            else:
                delay = spec.delay_ms or 0.0
            out[(s, d)] = Link(s, d, delay, spec.jitter_ms, spec.loss_pct)
    for p in spec.pairs:
        dirs = [(p.a, p.b)] if p.directed else [(p.a, p.b), (p.b, p.a)]
        for key in dirs:
            old = out[key]
            out[key] = Link(key[0], key[1],
                            old.delay_ms if p.delay_ms is None else p.delay_ms,
                            old.jitter_ms if p.jitter_ms is None else p.jitter_ms,
                            old.loss_pct if p.loss_pct is None else p.loss_pct)
    return out


def expected_rtt_ms(spec_links: dict[tuple[int, int], Link], a: int, b: int) -> float:
    """Round-trip time a->b->a the WAN should show: the sum of the two one-way delays."""
    return spec_links[(a, b)].delay_ms + spec_links[(b, a)].delay_ms


def parse(data: object, source: str = "") -> LabSpec:
    """Validate a spec mapping; raise UserError naming the field (and file) on bad input."""
    return validate(LabSpec, data, source, expected="a mapping of keys (sites, delay_ms, ...)",
                    unknown_key_hint="see `juice lab up --help` for the spec format")


def load(path: Path) -> LabSpec:
    """Read and validate a YAML lab spec file."""
    return parse(read_yaml(path, expected="a mapping of keys (sites, delay_ms, ...)"), str(path))


def check_name(name: str, option: str = "--name") -> str:
    """``name`` when it can name a lab (what ``LabSpec.name`` accepts), else a one-line
    UserError naming ``option``: a lab name becomes a file name under the state directory."""
    if not LAB_NAME_RE.match(name) or not name.isascii():
        raise UserError(f"{option}: {name!r} is not a lab name (1-12 lowercase letters/digits, "
                        f"a letter first)")
    return name


def even_zones(sites: int, count: int) -> dict[str, list[int]]:
    """Split sites 1..N into ``count`` contiguous zones Z1..Zk (sizes differ by at most one)."""
    if not 1 <= count <= sites:
        raise UserError(f"--zones: must be between 1 and --sites ({sites}), got {count}")
    base, extra = divmod(sites, count)
    out: dict[str, list[int]] = {}
    nxt = 1
    for z in range(count):
        size = base + (1 if z < extra else 0)
        out[f"Z{z + 1}"] = list(range(nxt, nxt + size))
        nxt += size
    return out
