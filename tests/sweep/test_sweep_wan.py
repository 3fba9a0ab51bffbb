"""Every run made in a lab records the lab's WAN check (``wan.check``: the RTT of every pair of
sites or hosts) in its manifest, whatever the study: checked at the start of the lab's first
run on a WAN, reused while the WAN is unchanged, checked again when a study changes it during
its run; a study's own check stays; a check that cannot be made is said, not fatal."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juice.contract import Progress, Run, Study
from juice.sweep import sweep


class WanSpec:
    def __init__(self, delay_ms: float) -> None:
        self.delay_ms = delay_ms

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        return {"name": "lab", "sites": 3, "delay_ms": self.delay_ms}


class Report:
    def __init__(self, delay_ms: float, n: int) -> None:
        self.delay_ms, self.n, self.ok = delay_ms, n, True

    def to_dict(self) -> dict[str, Any]:
        return {"lab": "lab", "pairs": [{"a": 1, "b": 2, "median_rtt_ms": 2 * self.delay_ms}],
                "ok": self.ok, "check": self.n}


class FakeLab:
    """Enough of a Lab for the runner: its WAN spec, a counted check, no profile."""

    def __init__(self, broken: bool = False) -> None:
        self.spec = WanSpec(10.0)
        self.checks = 0
        self.broken = broken

    def check(self, probes: int = 10) -> Report:
        if self.broken:
            raise OSError("ping: not found")
        self.checks += 1
        return Report(self.spec.delay_ms, self.checks)

    def local_namespaces(self) -> None:
        return None

    def sampled_hosts(self) -> None:
        return None


@dataclass(frozen=True)
class Point:
    delay_ms: float
    repetition: int
    own_check: bool = False

    @property
    def key(self) -> str:
        return f"d{self.delay_ms:g}-{self.repetition}-{int(self.own_check)}"

    dirname = key
    label = key

    @property
    def lab_key(self) -> int:
        return 0

    @property
    def deployment_key(self) -> int:
        return 0


class Delays(Study[Any, Point]):
    """Changes the lab's WAN inside its runs (as Keystone's WAN axis does)."""

    name = "delays"
    title = "Delays"

    def __init__(self, lab: FakeLab, points: list[Point]) -> None:
        self.the_lab, self.points = lab, points

    def parse(self, data: Mapping[str, Any], source: str) -> Any:
        raise NotImplementedError

    def expand(self, spec: Any) -> list[Point]:
        return self.points

    @contextmanager
    def lab(self, spec: Any, points: Sequence[Point], progress: Progress) -> Iterator[FakeLab]:
        yield self.the_lab

    @contextmanager
    def deployment(self, spec: Any, lab: Any, points: Sequence[Point], progress: Progress) -> Iterator[None]:
        yield None

    def run_point(self, run: Run[Any, Point], deployment: Any) -> None:
        if run.point.delay_ms != self.the_lab.spec.delay_ms:
            self.the_lab.spec = WanSpec(run.point.delay_ms)
        extra = {"wan": {"point": "x", "check": {"own": True}}} if run.point.own_check else {}
        run.manifest(params={"delay_ms": run.point.delay_ms}, **extra)

    def plan_columns(self, point: Point) -> dict[str, Any]:
        return {}

    def estimate_s(self, point: Point) -> float:
        return 0.0


def _wan(tmp: Path, key: str) -> dict[str, Any]:
    m = json.loads(next(tmp.glob(f"{key}-*/manifest.json")).read_text())
    return dict(m["wan"])


def test_every_run_records_the_wan_check(tmp_path: Path) -> None:
    lab = FakeLab()
    pts = [Point(10.0, 0), Point(10.0, 1), Point(50.0, 0), Point(50.0, 1), Point(50.0, 2, own_check=True)]
    said: list[str] = []
    assert sweep.run(Delays(lab, pts), object(), {}, "", tmp_path, said.append)[1] == 5
    first = _wan(tmp_path, "d10-0-0")
    assert first["check_made"] == "at this run's start" and first["check"]["check"] == 1
    again = _wan(tmp_path, "d10-1-0")
    assert again["check"] == first["check"] and "d10-0-0" in again["check_made"]
    # the study moved the WAN to 50 ms during this run: checked on the WAN it ran on
    moved = _wan(tmp_path, "d50-0-0")
    assert moved["check"]["pairs"][0]["median_rtt_ms"] == 100.0
    assert moved["check_made"] == "at this run's end (the study changed the WAN during it)"
    assert _wan(tmp_path, "d50-1-0")["check"] == moved["check"]
    own = _wan(tmp_path, "d50-2-1")
    assert own == {"point": "x", "check": {"own": True}}  # the study's own check stays
    assert lab.checks == 2  # 10 ms at the first run's start, 50 ms after the move: the rest reused


def test_a_check_that_cannot_be_made_is_recorded_not_fatal(tmp_path: Path) -> None:
    lab = FakeLab(broken=True)
    assert sweep.run(Delays(lab, [Point(10.0, 0)]), object(), {}, "", tmp_path, lambda _: None)[1:] == (1, 0)
    assert _wan(tmp_path, "d10-0-0") == {"check_error": "OSError: ping: not found"}
