"""Findings: the sentences a study section opens with, computed from the data (never written by
hand), each with its interval and whether it is real or within noise.

    c = contrast(base_values, other_values, key=("galera", 50))   # bootstrap, fixed seed
    f = Finding(f"Galera at 50 ms: {seconds(c.b)} against {seconds(c.a)} at 0 ms ({c.ratio_text})",
                c.verdict)
    html = findings_html("Keystone", [f, ...])      # <section class=findings>... (first in a section)
    parts = with_summary(parts)                      # a one-screen summary first when several
                                                      # study sections have findings

**The run is the unit of evidence** (``juice.analysis.runlevel``): with clusters (run ids) a
side's runs each give one statistic (their mean or median), and the difference ``b - a`` is
judged against the spread between runs: Welch's t with two or more runs a side, the spread of
the side that has several when the other has one, or ``spread`` (a pooled or calibrated
run-to-run CV) when given. "Real": the interval excludes 0; "within noise": it holds 0;
"one run a side": no verdict, the run-to-run variation is unknown. **Confounded**: when
``order`` (run id -> its place in the run order) shows every run of one side ran before every
run of the other, the difference may be the order's (a first-run or drift effect), so the
verdict is "confounded with run order", never "real". Each side's own interval
(``estimate``) still resamples runs, then values: it describes the side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from juice.analysis import bootstrap, runlevel

if TYPE_CHECKING:
    import pandas as pd

REAL = "real"
NOISE = "within noise"
NO_INTERVAL = "no interval (too few values)"
ONE_RUN = "one run a side"
CONFOUNDED = "confounded with run order"
BROKEN = "broken"  # an invariant that must hold did not (a finding, never silent)


@dataclass(frozen=True)
class Estimate:
    """A statistic with its 95 % interval (NaN bounds: no interval)."""

    value: float
    lo: float
    hi: float

    def has_interval(self) -> bool:
        return bool(np.isfinite(self.lo) and np.isfinite(self.hi))


@dataclass(frozen=True)
class Contrast:
    """``b`` against ``a``: each side's statistic, their difference ``b - a`` and its verdict."""

    a: Estimate
    b: Estimate
    diff: Estimate
    method: str = ""
    confounded: bool = False
    runs: tuple[int, int] = (0, 0)

    @property
    def verdict(self) -> str:
        if self.confounded:
            return CONFOUNDED
        if not self.diff.has_interval():
            return ONE_RUN if self.method == runlevel.UNKNOWN else NO_INTERVAL
        return REAL if (self.diff.lo > 0 or self.diff.hi < 0) else NOISE

    @property
    def real(self) -> bool:
        return self.verdict == REAL

    @property
    def ratio(self) -> float:
        return self.b.value / self.a.value if self.a.value else float("nan")

    @property
    def ratio_text(self) -> str:
        r = self.ratio
        return f"{r:.3g}×" if np.isfinite(r) else "–"


def estimate(values: npt.ArrayLike, clusters: npt.ArrayLike | None = None,
             key: object = (), stat: str = "mean") -> tuple[Estimate, npt.NDArray[np.float64]]:
    """The ``stat`` ("mean" or "median") of ``values`` with its interval, and its replicates."""
    raw = np.asarray(values, dtype=float)
    keep = np.isfinite(raw)
    v = raw[keep]
    c = None
    if clusters is not None:
        cl = np.asarray(clusters)
        if len(cl) != len(raw):
            raise ValueError("clusters: one per value")
        c = np.unique(cl[keep].astype(str), return_inverse=True)[1]
    if not len(v):
        return Estimate(float("nan"), float("nan"), float("nan")), np.full(bootstrap.RESAMPLES, np.nan)
    reps = bootstrap.replicates(v, None, c, (0.5,), bootstrap.group_rng(key, stat))
    r = reps.mean if stat == "mean" else reps.quantiles[0]
    point = float(v.mean() if stat == "mean" else np.median(v))
    lo, hi = bootstrap.interval(r)
    return Estimate(point, lo, hi), r


def run_stats(values: npt.ArrayLike, clusters: npt.ArrayLike | None, stat: str
              ) -> tuple[list[float], list[str]]:
    """One ``stat`` per cluster (run), and the clusters, in first-seen order."""
    v = np.asarray(values, dtype=float)
    c = np.asarray(clusters).astype(str) if clusters is not None else np.full(len(v), "")
    out: list[float] = []
    names: list[str] = []
    for name in dict.fromkeys(str(x) for x in c.tolist()):
        x = v[(c == name) & np.isfinite(v)]
        if len(x):
            out.append(float(x.mean() if stat == "mean" else np.median(x)))
            names.append(name)
    return out, names


def contrast(a: npt.ArrayLike, b: npt.ArrayLike, a_clusters: npt.ArrayLike | None = None,
             b_clusters: npt.ArrayLike | None = None, key: object = (), stat: str = "mean",
             spread: runlevel.Spread | None = None,
             order: Mapping[str, float] | None = None) -> Contrast:
    """``b`` against ``a`` (the reference): their ``stat`` (with their own intervals) and the
    run-level interval of ``b - a`` (see the module). Without clusters each side is one run."""
    ea, _ = estimate(a, a_clusters, ("a", key), stat)
    eb, _ = estimate(b, b_clusters, ("b", key), stat)
    sa, na = run_stats(a, a_clusters, stat)
    sb, nb = run_stats(b, b_clusters, stat)
    d = runlevel.difference(sa, sb, spread)
    confounded = False
    if order is not None and d.method != runlevel.SAME:
        pa = [order[n] for n in na if n in order]
        pb = [order[n] for n in nb if n in order]
        confounded = len(pa) == len(na) and len(pb) == len(nb) and bool(pa) and bool(pb) \
            and (max(pa) < min(pb) or max(pb) < min(pa))
    return Contrast(ea, eb, Estimate(eb.value - ea.value, d.lo, d.hi), d.method, confounded,
                    (len(sa), len(sb)))


def study_spread(frame: pd.DataFrame | None, value: str, config: Sequence[str], run: str = "run",
                 stat: str = "mean") -> runlevel.Spread | None:
    """The run-to-run spread pooled over every configuration of ``frame`` that has two or more
    runs (configurations: the distinct values of ``config`` columns; a run's value: the
    ``stat`` of its ``value`` column): relative variances weighted by their degrees of freedom,
    as a one-way random-effects model with a common CV would. None with no repeated
    configuration. Passed to :func:`contrast` as ``spread``, it decides comparisons whose sides
    have too few runs of their own — on the assumption, stated in the method, that the CV
    between runs is the same across the configurations."""
    import pandas as pd

    if frame is None or len(frame) == 0 or run not in frame.columns or value not in frame.columns:
        return None
    cols = [c for c in config if c in frame.columns and c != run]
    by_run = frame.groupby(run, observed=True, sort=False)
    per_run = pd.DataFrame({"v": by_run[value].mean() if stat == "mean" else by_run[value].median(),
                            **{f"c{i}": by_run[c].first() for i, c in enumerate(cols)}})
    if per_run.empty:
        return None
    keys = per_run[[f"c{i}" for i in range(len(cols))]].astype(str).agg("\x1f".join, axis=1) \
        if cols else pd.Series("", index=per_run.index)
    num = 0.0
    df = 0
    groups = 0
    for _, g in per_run.groupby(keys, sort=False):
        sp = runlevel.spread_of([float(x) for x in g["v"]], "")
        if sp is None or not np.isfinite(sp.cv):
            continue
        num += sp.df * sp.cv * sp.cv
        df += sp.df
        groups += 1
    if df == 0:
        return None
    return runlevel.Spread(float(np.sqrt(num / df)), df,
                           f"run-to-run CV of {groups} configuration{'s' * (groups > 1)} pooled (df {df})",
                           covers_sides=True)


def run_order(manifests: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """Run name (``_dir``) -> its place in the sweep's order, for ``contrast(order=...)``:
    ``order_index`` where the sweep recorded it, else the start time; runs with neither left
    out (then no verdict of theirs is called confounded)."""
    import datetime as dt

    out: dict[str, float] = {}
    for m in manifests:
        name = m.get("_dir")
        if not name:
            continue
        idx = m.get("order_index")
        if isinstance(idx, int | float) and idx >= 0:
            out[str(name)] = float(idx)
            continue
        t = m.get("started_at")
        if isinstance(t, int | float):
            out[str(name)] = float(t)
        elif isinstance(t, str) and t:
            try:
                out[str(name)] = dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
            except ValueError:
                pass
    return out


def run_order_of_dirs(dirs: Sequence[object]) -> dict[str, float]:
    """:func:`run_order` of run directories (their manifest.json; unreadable ones left out)."""
    import json
    from pathlib import Path

    mans = []
    for d in dirs:
        try:
            m = json.loads((Path(str(d)) / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict):
            mans.append({**m, "_dir": Path(str(d)).name})
    return run_order(mans)


def num(x: float, unit: str = "", digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits (and ``unit``), "–" when not finite."""
    if x is None or not np.isfinite(x):
        return "–"
    s = f"{x:.{digits}g}"
    if "e" in s:
        s = f"{x:,.0f}"
    return f"{s} {unit}".strip() if unit and unit != "%" else f"{s}{unit}"


def with_ci(e: Estimate, unit: str = "s", digits: int = 3) -> str:
    """"1.77 s [1.6, 1.9]" (no bracket without an interval)."""
    if not e.has_interval():
        return num(e.value, unit, digits)
    return f"{num(e.value, unit, digits)} [{num(e.lo, '', digits)}, {num(e.hi, '', digits)}]"


@dataclass(frozen=True)
class Finding:
    """One sentence; ``verdict``: REAL / NOISE / NO_INTERVAL, or None for a plain fact."""

    text: str
    verdict: str | None = None

    def html(self) -> str:
        v = ""
        if self.verdict:
            cls = {REAL: "real", NOISE: "noise", CONFOUNDED: "conf", BROKEN: "conf"}.get(self.verdict, "na")
            v = f' <span class="v {cls}">{escape(self.verdict)}</span>'
        return f"<li>{escape(self.text)}{v}</li>"


MAX_FINDINGS = 8


def findings_html(title: str, findings: Sequence[Finding], note: str = "") -> str:
    """The findings block a study section opens with (at most ``MAX_FINDINGS`` sentences);
    "" when there is none."""
    if not findings:
        return ""
    items = "".join(f.html() for f in findings[:MAX_FINDINGS])
    tail = (f"<p class=note>{escape(note)} " if note else "<p class=note>") + (
        "The run is the unit of evidence: a difference is judged against the spread between runs "
        "(each run one value; Welch's t, 95 %), never against the iterations of one run. "
        "<i>real</i>: the difference's interval excludes 0; <i>within noise</i>: it holds 0; "
        "<i>one run a side</i>: no verdict (run-to-run variation unknown: repeat the runs, or "
        "<code>juice calibrate</code>); <i>confounded with run order</i>: every run of one side ran "
        "before the other's. Values in brackets: each side's 95 % bootstrap interval (runs, then "
        "values within them).</p>")
    return (f'<section class=findings data-title="{escape(title, quote=True)}"><h3>Findings</h3>'
            f"<ul>{items}</ul>{tail}</section>")


_BLOCK = re.compile(r'<section class=findings data-title="([^"]*)"><h3>Findings</h3><ul>(.*?)</ul>',
                    re.S)
_ITEM = re.compile(r"<li>.*?</li>", re.S)
_SEEDS = re.compile(r'<section class=seeds data-title="([^"]*)" data-tally="([^"]*)">')


def with_summary(parts: list[str], per_section: int = 3) -> list[str]:
    """``parts`` with a one-screen summary first when two or more of them open with findings:
    the first ``per_section`` findings of each, under its study's title, and the tally of its
    "seed beside Juice" verdicts (``juice.report.seeds``) when it has that table."""
    blocks = [(m.group(1), _ITEM.findall(m.group(2))) for p in parts for m in _BLOCK.finditer(p)]
    if len(blocks) < 2:
        return parts
    tallies = {m.group(1): m.group(2) for p in parts for m in _SEEDS.finditer(p)}
    rows = "".join(f"<li><b>{title}</b><ul>{''.join(items[:per_section])}"
                   + (f"<li class=tally>Seed beside Juice: {tallies[title]}</li>" if title in tallies else "")
                   + "</ul></li>" for title, items in blocks)
    return ["<section class=summary><h2>Summary</h2><p class=note>The first findings of each "
            f"section below ({len(blocks)} sections).</p><ul>{rows}</ul></section>", *parts]


CSS = """
section.findings{background:#f7f9fc;border-left:4px solid #4e79a7;padding:.3em 1em;margin:1em 0}
section.findings h3{margin:.3em 0}section.findings li{margin:.2em 0}
section.summary>ul>li{margin:.4em 0}li.tally{color:#555;font-size:13px}
.v{font-size:11px;padding:0 4px;border-radius:3px;white-space:nowrap}
.v.real{background:#d8ecd8}.v.noise{background:#eee}.v.na{background:#fbeed5}.v.conf{background:#f6d5d5}
"""
