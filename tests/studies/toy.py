"""A toy study written against the study contract only (``juice.contract``): it pings
site 2 from site 1 of a real 2-site lab at each one-way delay of its spec and stores the
round-trip times. It exists to prove that a study plugs into `juice plan`, `juice run`,
`juice report` and `juice analyze` without any of them knowing its name.

    workload: toy
    name: pings
    delay_ms: [0, 5]      # one lab per delay (the lab key)
    count: 3              # pings per run
    repetitions: 2
    # runner: {warmup_runs: 1}   # a discarded run per lab before its measured ones (default 0)
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, ClassVar, Literal

import pandas as pd
from pydantic import Field

from juice.contract import Progress, ReportInput, Run, Study
from juice.errors import JuiceError
from juice.lab import LocalLab
from juice.lab import spec as labspec
from juice.lab.place import Lab
from juice.report.tables import table_html
from juice.results.store import counted
from juice.sla.criteria import Sla
from juice.spec.study import StudySpec
from juice.spec.warmup import SweepRunner
from juice.util.validation import validate


class ToySpec(StudySpec[Sla]):
    """The frame (``juice.spec.study.StudySpec``) gives name, description, seed, repetitions,
    sla, provider and the ``wan: {delay_ms: [...]}`` section; the toy declares only its own."""

    WAN_INTO: ClassVar[str | None] = "delay_ms"  # wan: {delay_ms: [...]} lands in delay_ms

    workload: Literal["toy"]
    delay_ms: list[float] = Field(min_length=1)
    count: int = Field(default=3, ge=1, le=20)
    repetitions: int = Field(default=1, ge=1, le=5)  # the frame's field, bounded lower
    runner: SweepRunner = Field(default_factory=SweepRunner)  # the sweep's options (warmup_runs)

    def lab_sites(self) -> int | None:
        return 2


@dataclass(frozen=True)
class ToyPoint:
    delay_ms: float
    count: int
    repetition: int

    @property
    def key(self) -> str:
        ident = {"toy": 1, "delay_ms": self.delay_ms, "count": self.count, "rep": self.repetition}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def dirname(self) -> str:
        return f"ping-{self.delay_ms:g}ms-r{self.repetition}"

    @property
    def label(self) -> str:
        return f"ping at {self.delay_ms:g} ms one-way, repetition {self.repetition}"

    @property
    def lab_key(self) -> float:
        return self.delay_ms

    @property
    def deployment_key(self) -> int:
        return 0  # nothing deployed: the lab is the system under test


class Toy(Study[ToySpec, ToyPoint, LocalLab]):  # spec, point, deployment types
    name = "toy"
    title = "Toy pings"

    def parse(self, data: Mapping[str, Any], source: str) -> ToySpec:
        return validate(ToySpec, dict(data), source, expected="a mapping", unknown_key_hint="see toy.py")

    def expand(self, spec: ToySpec) -> list[ToyPoint]:
        return [ToyPoint(d, spec.count, r) for d in spec.delay_ms for r in range(spec.repetitions)]

    @contextmanager
    def lab(self, spec: ToySpec, points: Sequence[ToyPoint], progress: Progress) -> Iterator[LocalLab]:
        ls = labspec.parse({"name": "toy" + secrets.token_hex(3), "sites": 2,
                            "delay_ms": points[0].delay_ms})
        progress(f"lab {ls.name}: 2 sites at {points[0].delay_ms:g} ms one-way")
        with LocalLab.up(ls, ephemeral=True, progress=progress) as lab:
            yield lab

    def deployment(self, spec: ToySpec, lab: Lab | None, points: Sequence[ToyPoint],
                   progress: Progress) -> nullcontext[LocalLab]:
        assert isinstance(lab, LocalLab)  # the one lab() gives
        return nullcontext(lab)  # nothing deployed: the lab is the system under test

    def run_point(self, run: Run[ToySpec, ToyPoint], deployment: LocalLab) -> None:
        lab, p = deployment, run.point
        run.manifest(params={"delay_ms": p.delay_ms, "count": p.count, "repetition": p.repetition})
        cp = lab.run(1, ["ping", "-c", str(p.count), "-i", "0.2", "-W", "5", lab.site_ip(2)],
                     check=False, timeout=60)
        rtts = [float(x) for x in re.findall(r"time=([0-9.]+) ms", cp.stdout)]
        if not rtts:
            raise JuiceError(f"no ping answered: {cp.stdout.strip()[-200:]}")
        run.rd.write_json("pings.json", {"rtt_ms": rtts})
        # each ping as a Rally-like iteration: compare, trend, sla and calibrate read these
        run.rd.write_text("iterations.jsonl", "".join(
            json.dumps({"timestamp": i * 0.2, "duration": r / 1000.0, "error": [], "atomic_actions": []})
            + "\n" for i, r in enumerate(rtts)))

    def plan_columns(self, point: ToyPoint) -> dict[str, Any]:
        return {"delay (one-way)": f"{point.delay_ms:g} ms", "pings": point.count, "rep": point.repetition}

    def estimate_s(self, point: ToyPoint) -> float:
        return 0.2 * point.count + 2 * point.delay_ms / 1000 * point.count

    def overhead_s(self, points: Sequence[ToyPoint]) -> float:
        return 1.0 * len({p.lab_key for p in points})

    def summary_lines(self, study_dir: Path) -> list[str]:
        df = _load([study_dir])
        return [f"toy: {len(df)} pings, median RTT {df['rtt_ms'].median():.2f} ms"] if len(df) else []

    def report_sections(self, inputs: ReportInput) -> list[str]:
        df = _load(inputs.paths)
        if df.empty:
            return []
        table = df.groupby("delay_ms", as_index=False)["rtt_ms"].agg(["count", "median", "max"])
        return [f"<h2>{escape(self.title)}</h2>", table_html(table)]

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Mapping[str, Any],
                filter_q: float | None) -> pd.DataFrame | None:
        df = _load(list(paths))
        if df.empty:
            return None
        return df.groupby(["delay_ms", *by], as_index=False)["rtt_ms"].agg(["count", "median"])


def _load(paths: Sequence[Path]) -> pd.DataFrame:
    rows = []
    for p in paths:
        for m in sorted(Path(p).glob("*/manifest.json")):
            if not counted(m.parent.name):  # failed, partial or warm-up runs: never counted
                continue
            man = json.loads(m.read_text())
            if man.get("workload") != "toy" or not (m.parent / "pings.json").exists():
                continue
            for rtt in json.loads((m.parent / "pings.json").read_text())["rtt_ms"]:
                rows.append({**man["params"], "rtt_ms": rtt, "run": m.parent.name})
    return pd.DataFrame(rows, columns=["delay_ms", "count", "repetition", "rtt_ms", "run"])
