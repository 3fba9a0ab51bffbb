"""Per-run summaries and resource-profile peaks in the OpenMetrics / Prometheus text format
(``juice export openmetrics``), for a Prometheus (node_exporter's textfile collector,
``promtool tsdb create-blocks-from openmetrics``) and the Grafana in front of it.

Every family is a gauge, every sample labelled ``run`` (the run directory's name, or a Rally
file's ``<stem>#<task>.<subtask>.<workload>``), ``workload`` (the study, or ``rally``) and the
run's stored parameters as ``param_<name>`` (the union over the runs: "" where a run has no
such parameter, which Prometheus reads as absent)::

    juice_run_iterations                  iterations (warm-up left out)
    juice_run_failures                    iterations that failed
    juice_run_samples{sample=...}         samples kept (juice.results.samples: iteration,
                                          atomic:<action>, call_s, oneway_s, boot_s,
                                          nova_boot_s, read_s)
    juice_run_sample_mean_seconds{sample=...}   their mean
    juice_run_sample_p95_seconds{sample=...}    their 95th percentile
    juice_run_measure{measure=...}        the run's counts and shares (success_pct, lost,
                                          duplicated, boot_success_pct)
    juice_profile_cpu_peak_percent{site, component, pid}   a process's peak CPU (% of a core)
    juice_profile_rss_peak_bytes{site, component, pid}     its peak resident memory

The profile families come from a run's ``profile.parquet`` (``juice.profile``), read as rates
by ``juice.profile.frames.utilisation``. No timestamps (a textfile collector refuses them; a
run's start is ``juice_run_start_timestamp_seconds``), unless ``stamp``: every sample at its
run's start, as ``promtool tsdb create-blocks-from openmetrics`` needs to backfill them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import numpy as np

from juice.results.samples import Unit

PREFIX = "juice"
FORMATS = ("openmetrics", "prometheus")
_BAD = re.compile(r"[^a-zA-Z0-9_]")


@dataclass
class Family:
    """One metric family: its name, help, unit (OpenMetrics; "" for none) and samples."""

    name: str
    help: str
    unit: str = ""
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)
    # per sample (same order), the time it is stamped with (epoch s), None: no timestamp
    stamps: list[float | None] = field(default_factory=list)

    def add(self, labels: dict[str, str], value: float, stamp: float | None = None) -> None:
        self.samples.append((labels, value))
        self.stamps.append(stamp)


def label_name(key: str, prefix: str = "param_") -> str:
    """A valid label name (``[a-zA-Z_][a-zA-Z0-9_]*``; ``__`` is reserved) from ``key``."""
    name = prefix + _BAD.sub("_", key)
    if not name or name[0].isdigit():
        name = "x" + name
    return "x" + name if name.startswith("__") else name


def escape_label(value: str) -> str:
    """A label value as the exposition formats quote it: backslash, double quote, newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str, fmt: str = "openmetrics") -> str:
    """HELP text: backslash and newline escaped (OpenMetrics also escapes double quotes)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n")
    return out.replace('"', '\\"') if fmt == "openmetrics" else out


def number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if float(v).is_integer() and abs(v) < 2**53:
        return str(int(v))
    return repr(float(v))


def _param_text(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int | float):
        return number(float(v))
    return json.dumps(v, sort_keys=True, default=str)


def _base_labels(units: Sequence[Unit]) -> list[dict[str, str]]:
    """``run``, ``workload`` and ``param_*`` of each unit (every unit the same label names)."""
    keys: dict[str, str] = {}  # parameter -> its label (two that sanitize alike kept apart)
    for u in units:
        given = u.meta.get("params")
        for k in given if isinstance(given, Mapping) else {}:
            if str(k) in keys:
                continue
            name = label_name(str(k))
            while name in keys.values():
                name += "_"
            keys[str(k)] = name
    out: list[dict[str, str]] = []
    seen: dict[str, int] = {}
    for u in units:
        run = u.name
        seen[run] = seen.get(run, 0) + 1
        if seen[run] > 1:  # the same run name under two paths: keep the series apart
            run = f"{run}#{seen[run]}"
        given = u.meta.get("params")
        params: Mapping[str, object] = given if isinstance(given, Mapping) else {}
        labels = {"run": run, "workload": u.workload}
        labels.update({name: _param_text(params.get(k)) for k, name in keys.items()})
        out.append(labels)
    return out


def started(u: Unit) -> float | None:
    """The run's start (epoch s): a Juice manifest's ``started_at``, a Rally ``created_at``."""
    v = u.meta.get("started_at") or u.meta.get("created_at")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            t = datetime.fromisoformat(v)
        except ValueError:
            return None
        return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
    return None


def run_families(units: Sequence[Unit], stamp: bool = False) -> list[Family]:
    """The per-run summary families of ``units`` (``stamp``: each sample at its run's start)."""
    its = Family(f"{PREFIX}_run_iterations", "Iterations of the run (warm-up left out).")
    fails = Family(f"{PREFIX}_run_failures", "Iterations of the run that failed.")
    begun = Family(f"{PREFIX}_run_start_timestamp_seconds", "When the run started (epoch "
                     "seconds).", "seconds")
    count = Family(f"{PREFIX}_run_samples", "Samples kept of each measure "
                   "(juice.results.samples: iteration, atomic:<action>, call_s, ...).")
    mean = Family(f"{PREFIX}_run_sample_mean_seconds", "Mean of each sample of the run.", "seconds")
    p95 = Family(f"{PREFIX}_run_sample_p95_seconds", "95th percentile of each sample of the run.",
                 "seconds")
    measure = Family(f"{PREFIX}_run_measure", "The run's counts and shares (success_pct, lost, "
                     "duplicated, boot_success_pct).")
    for u, labels in zip(units, _base_labels(units), strict=True):
        t = started(u)
        at = t if stamp else None
        if u.iterations is not None:
            its.add(labels, float(len(u.iterations)), at)
            fails.add(labels, float(sum(1 for d in u.iterations if d.get("error"))), at)
        if t is not None:
            begun.add(labels, t, at)
        for name in sorted(u.samples):
            vals = u.samples[name]
            with_sample = {**labels, "sample": name}
            count.add(with_sample, float(len(vals)), at)
            if len(vals):
                mean.add(with_sample, float(np.mean(vals)), at)
                p95.add(with_sample, float(np.percentile(vals, 95)), at)
        for name in sorted(u.counts):
            measure.add({**labels, "measure": name}, float(u.counts[name]), at)
    return [its, fails, begun, count, mean, p95, measure]


def profile_families(units: Sequence[Unit], stamp: bool = False) -> list[Family]:
    """Per-process CPU and RSS peaks of the units that have a ``profile.parquet``."""
    from juice.profile.frames import PROFILE_TABLE, load_profile, utilisation

    cpu = Family(f"{PREFIX}_profile_cpu_peak_percent", "A process's peak CPU during the run, % of "
                 "one core (user + system; above 100 for several busy threads).", "percent")
    rss = Family(f"{PREFIX}_profile_rss_peak_bytes", "A process's peak resident memory during the "
                 "run.", "bytes")
    for u, labels in zip(units, _base_labels(units), strict=True):
        if u.kind != "juice" or not (u.path / PROFILE_TABLE).is_file():
            continue
        util = utilisation(load_profile([u.path]))
        if util.empty:
            continue
        util = util[util["pid"] > 0]
        at = started(u) if stamp else None
        for fam, metric in ((cpu, "cpu_pct"), (rss, "rss_bytes")):
            sub = util[util["metric"].astype(str) == metric]
            if sub.empty:
                continue
            peaks = sub.groupby(["site", "component", "pid"], observed=True)["value"].max()
            for key, v in peaks.items():
                site, comp, pid = cast(tuple[float, object, float], key)  # the groupby's three keys
                fam.add({**labels, "site": str(int(site)), "component": str(comp),
                         "pid": str(int(pid))}, float(v), at)
    return [cpu, rss]


def render(families: Iterable[Family], fmt: str = "openmetrics") -> str:
    """The exposition text of ``families`` (empty families left out): OpenMetrics 1.0 (with
    ``# UNIT`` and ``# EOF``) or the Prometheus text format 0.0.4."""
    if fmt not in FORMATS:
        raise ValueError(f"format: {fmt!r} (choose one of {', '.join(FORMATS)})")
    lines: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        lines.append(f"# HELP {fam.name} {escape_help(fam.help, fmt)}")
        lines.append(f"# TYPE {fam.name} gauge")
        if fam.unit and fmt == "openmetrics":
            lines.append(f"# UNIT {fam.name} {fam.unit}")
        stamps = fam.stamps or [None] * len(fam.samples)
        for (labels, value), at in zip(fam.samples, stamps, strict=True):
            body = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
            line = f"{fam.name}{{{body}}} {number(value)}" if body else f"{fam.name} {number(value)}"
            if at is not None:  # OpenMetrics: seconds; Prometheus 0.0.4: integer milliseconds
                line += f" {at:.3f}" if fmt == "openmetrics" else f" {round(at * 1000)}"
            lines.append(line)
    if fmt == "openmetrics":
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def export(paths: Sequence[Path], fmt: str = "openmetrics", stamp: bool = False) -> tuple[str, int]:
    """(text, runs) of every run under ``paths`` (``juice.results.samples.units``); ``stamp``:
    every sample at its run's start (for a backfill), the runs without a start left out."""
    from juice.results.samples import units

    found = units(paths)
    if stamp:
        found = [u for u in found if started(u) is not None]
    return render([*run_families(found, stamp), *profile_families(found, stamp)], fmt), len(found)
