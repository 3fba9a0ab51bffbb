"""The sections every study's report gets without asking (the study frame): made from what
each run directory holds, never wired by a study.

    parts = shared.around(study, inputs, own)   # the study's own sections with the frame's

For each study with runs among the report's paths, the frame puts the SLA verdicts first (under
the study's heading when its first section opens with one), then the study's own sections, then
each provider of ``AFTER`` in order: run order, fault timeline, servers' errors, request traces,
resource profile, and the server settings that differ from their defaults last. A provider is a
function ``(StudyRuns) -> list[str]`` (HTML fragments) returning [] when the runs hold nothing
for it, so a study whose runs have no ``events.jsonl`` gets no fault section and a study never
shows a shared section twice (studies add none of these themselves). Add one with
:func:`register`.

What a provider reads: ``runs.dirs`` (the study's complete runs), ``runs.failed`` (its failed
runs), ``runs.manifests``, ``runs.iterations`` (the tidy table of ``dirs``, loaded once, empty
for runs without iterations) and ``runs.level`` (the run parameter a resource profile's load
levels are, ``Study.profile_level``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from juice.contract import ReportInput

NOVA_LOGS = ("nova*", "juice-conductor*", "juice-api*")  # a run the tracer can read
SERVER_ERRORS = "server-errors.json"  # a run's servers' WARNING/ERROR lines (juice.trace.logerrors)


@dataclass
class StudyRuns:
    """One study's runs among the report's paths (those ``owns`` accepts)."""

    inputs: ReportInput
    owns: Callable[[Mapping[str, Any]], bool]
    heading: str = "h2"   # "h3" under the study's own <h2>
    level: str = ""       # the resource profile's load levels (a run parameter)

    @cached_property
    def _found(self) -> tuple[list[Path], list[Path]]:
        from juice.results import tidy

        found = tidy.discover(self.inputs.paths)
        mine = [d for d in found.runs if self.owns(tidy.manifest_or_empty(d))]
        failed = [d for d in found.failed if self.owns(tidy.manifest_or_empty(d))]
        return mine, failed

    @property
    def dirs(self) -> list[Path]:
        """The study's complete runs, in the order found."""
        return self._found[0]

    @property
    def failed(self) -> list[Path]:
        """The study's failed runs (``<run>.failed``)."""
        return self._found[1]

    @cached_property
    def manifests(self) -> list[dict[str, Any]]:
        """The manifests of ``dirs``, each with ``_dir`` (the run's name)."""
        from juice.results import tidy

        return [{**tidy.manifest_or_empty(d), "_dir": d.name} for d in self.dirs]

    @cached_property
    def iterations(self) -> pd.DataFrame:
        """The tidy table of ``dirs`` (``juice.results.tidy.load``); empty when they hold no
        iteration table (e.g. messaging, scheduler-db runs)."""
        from juice.results import tidy

        dirs = [d for d in self.dirs if (d / "iterations.jsonl").is_file()
                or (d / tidy.TABLE_NAME).is_file()]
        if not dirs:
            return pd.DataFrame()
        try:
            return tidy.load(dirs, allow_empty=True)
        except Exception:  # an optional block: a run the study reads its own way
            return pd.DataFrame()


Provider = Callable[[StudyRuns], list[str]]


# ---- the providers ----------------------------------------------------------------------------


def sla(runs: StudyRuns) -> list[str]:
    """Pass/fail of every judged run (``juice.report.sla``)."""
    from juice.report import sla as sla_report

    html = sla_report.section(runs.inputs.paths, owns=runs.owns, heading=runs.heading)
    return [html] if html else []


def deviations(runs: StudyRuns) -> list[str]:
    """Server settings that differ from the shipped defaults (``juice.report.deviations``)."""
    from juice.report import deviations as dev

    html = dev.section(runs.inputs.paths, owns=runs.owns, heading=runs.heading)
    return [html] if html else []


def calibration(runs: StudyRuns) -> list[str]:
    """This host's run-to-run calibration for the study's workload (``juice calibrate``), the
    one verdicts lean on where a side has one run; or a line saying there is none."""
    from juice.compare.calibration import Store

    mans = runs.manifests
    if not mans:
        return []
    hosts = {str((m.get("host") or {}).get("hostname")) for m in mans if isinstance(m.get("host"), Mapping)}
    workloads = {str(m.get("workload") or "keystone") for m in mans}
    if len(hosts) != 1 or len(workloads) != 1:
        return []
    (host,), (workload,) = hosts, workloads
    entries = [e for e in Store.load(host).entries if e.workload == workload and e.stat == "mean"]
    if not entries:
        return [f"<p class=note>Run-to-run calibration of {escape(host)}: none for this study "
                "(<code>juice calibrate SPEC</code> measures it). Verdicts rest on these runs' own "
                "spread; with one run a side there is none.</p>"]
    df = pd.DataFrame([{"configuration": e.label, "metric": e.metric, "CV of a run's mean": f"{e.cv:.1%}",
                        "A/A runs": e.runs, "deployments": "fresh" if e.fresh else "one",
                        "measured": e.measured_at[:10]} for e in entries if np.isfinite(e.cv)])
    if df.empty:
        return []
    from juice.report.layout import fit_table

    return [f"<details><summary>Run-to-run calibration of {escape(host)} ({len(df)} entries)"
            "</summary><p class=note>What a comparison with one run a side is judged against "
            "(<code>juice calibrate</code>; docs/verdicts.md).</p>"
            f"{fit_table(df, constants=False)}</details>"]


def run_order(runs: StudyRuns) -> list[str]:
    """The runs in the order the sweep ran them (``order_index``, deployment, position on it),
    folded; only runs that recorded their order."""
    from juice.report.layout import fit_table

    rows = []
    for m in runs.manifests:
        idx = m.get("order_index")
        if not isinstance(idx, int | float) or isinstance(idx, bool):
            continue
        found = m.get("order")
        order: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        rows.append({"#": int(idx), "run": m["_dir"], "deployment": order.get("deployment"),
                     "position on it": order.get("position")})
    if len(rows) < 2:
        return []
    df = pd.DataFrame(rows).sort_values("#", kind="stable")
    df = df.dropna(axis=1, how="all")
    return [f"<details><summary>Run order: {len(df)} runs in the order they ran</summary>"
            "<p class=note>Position 0 = the first measured run on a fresh deployment (warm-up runs "
            "are not counted). A comparison whose sides always ran in the same order is confounded "
            f"with it (the findings say so).</p>{fit_table(df, runs='run', constants=False)}</details>"]


def faults(runs: StudyRuns) -> list[str]:
    """Per run with a fault schedule (``events.jsonl``): what was done and when, and, for runs
    with iterations, λ and latency around each fault, recovery and the timeline
    (``juice.report.faults``)."""
    from juice.faults.report import read_events
    from juice.report.faults import events_table, section

    with_events = [d for d in runs.dirs if read_events(d)]
    if not with_events:
        return []
    it = runs.iterations
    body = section(with_events, it) if not it.empty and "run" in it.columns else []
    shown = {d.name for d in with_events if any(f"Faults in {escape(d.name)}<" in b for b in body)}
    for d in with_events:  # runs without iterations: the events alone
        if d.name not in shown:
            body += [f"<h3>Faults in {escape(d.name)}</h3>", events_table(read_events(d))]
    return ["<h2>Faults</h2>", *body]


def server_errors(runs: StudyRuns) -> list[str]:
    """The servers' own WARNING/ERROR lines during the runs (``server-errors.json``, failed runs
    included: their errors may say why), summed by template."""
    from juice.report.errors import error_table_html

    found = []
    for d in [*runs.dirs, *runs.failed]:
        try:
            doc = json.loads((d / SERVER_ERRORS).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("errors"), list):
            found.append((d.name, doc["errors"]))
    return error_table_html(found, "Servers: WARNING/ERROR lines by message template")


def traces(runs: StudyRuns) -> list[str]:
    """Request tracing of the runs that kept nova's services' logs (``juice.report.traces``)."""
    from juice.report.traces import trace_sections
    from juice.trace.report import traced

    # nova's services' logs: juice-api, juice-conductor, juice-sched-*, juice-c* (or nova-* from
    # an existing cloud)
    dirs = [d for d in runs.dirs if any(any((d / "logs").glob(p)) for p in NOVA_LOGS)]
    if not dirs:
        return []
    return trace_sections(dirs, traced(dirs))


def profile(runs: StudyRuns) -> list[str]:
    """Resource profiles (``juice.report.profiles``), the drivers' window shaded where the runs
    have iterations."""
    from juice.profile.report import read
    from juice.report.profiles import sections

    data = read(runs.dirs)
    if data is None:
        return []
    return sections(runs.dirs, level_key=runs.level or "load",
                                   windows=windows(runs.iterations), data=data)


def windows(df: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """run -> (first iteration start, last iteration end), epoch s: the drivers' window."""
    if df.empty or not {"timestamp", "iteration_duration_s", "run"} <= set(df.columns):
        return {}
    t = pd.DataFrame({"run": df["run"].astype(str), "start": df["timestamp"].astype(float),
                      "end": df["timestamp"].astype(float) + df["iteration_duration_s"].astype(float)})
    w = t.groupby("run").agg(start=("start", "min"), end=("end", "max"))
    return {str(r): (float(a), float(b)) for r, a, b in w.itertuples(name=None)
            if np.isfinite(a) and np.isfinite(b)}


BEFORE: list[Provider] = [sla]
AFTER: list[Provider] = [run_order, calibration, faults, server_errors, traces, profile, deviations]


def register(provider: Provider, before: bool = False) -> Provider:
    """Add ``provider`` to every study's report (after the study's own sections, before the
    settings table; ``before``: ahead of them, after the SLA)."""
    where = BEFORE if before else AFTER
    if provider not in where:
        where.insert(len(where) if before else len(where) - 1, provider)
    return provider


def around(own: Sequence[str], inputs: ReportInput, owns: Callable[[Mapping[str, Any]], bool],
           level: str = "") -> list[str]:
    """The study's ``own`` sections with the frame's around them ([] when ``own`` is: the
    paths hold none of the study's runs)."""
    if not own:
        return []
    headed = own[0].lstrip().startswith("<h2")
    runs = StudyRuns(inputs, owns, heading="h3" if headed else "h2", level=level)
    first = [f for p in BEFORE for f in p(runs) if f]
    head = [_after_heading(own[0], "".join(first)), *own[1:]] if headed and first else [*first, *own]
    return [*head, *(f for p in AFTER for f in p(runs) if f)]


def _after_heading(fragment: str, inserted: str) -> str:
    """``inserted`` right after the fragment's opening ``<h2>...</h2>``."""
    end = fragment.index("</h2>") + len("</h2>")
    return fragment[:end] + inserted + fragment[end:]
