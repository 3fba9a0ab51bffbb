"""The configuration key of a set of runs: every recorded field whose value differs between
them, so that no table, figure or finding pools runs that ran differently (DESIGN.md: "every
field that differs between runs is part of the configuration key").

A run's recorded fields come from its manifest: its ``params`` by their own names (nested ones
flattened as ``a.b``, lists as JSON text, as the tidy tables name them), then its deployment
facts, the server settings that differ from the shipped defaults (``deviations``), software
versions and the host, dotted by section (``deployment.computes.isolation``,
``deviations.nova-conductor [database] max_pool_size``), plus the sections a study names
(``bus``, ``lab``...). Left out: identity fields, which differ between any two runs (run ids,
repetitions, seeds, the spec's name, ports, host names: :data:`IGNORED`, which a comparison's
metadata leaves out too, and :data:`IDENTITY`), and the measurements and wiring a manifest keeps
among its facts (timings, memory, addresses: :data:`NOT_CONFIG`).

    rows = [fields(m) for m in manifests]                 # per run: field -> value
    extra = key_fields(rows, base=["db", "concurrency"])  # what else splits the runs
    notes = unrecorded(manifests, rows, [*base, *extra], names)

A field joins the key only when it splits runs that the key so far pools: a field that follows
from another (nodes per process, with the number of processes at a fixed node count) adds no
column, so tables show only what tells their rows apart. Runs the key still pools although
their manifests say they may differ (their specs differ in a field nothing else records, their
run keys differ at the same repetition, they record no parameters, different Juice versions
made them) are named by :func:`unrecorded`, a sentence each, for the report to show.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from html import escape
from typing import TypeVar

import pandas as pd

SECTIONS: tuple[str, ...] = ("params", "deployment", "deviations", "versions", "host")
# Identity: differs between the repetitions of one configuration (the per-run random seed is
# the spec's seed plus the repetition) or names, not configures (the spec's name: ``study``),
# so never part of "the same configuration" (nor of what a comparison's sides differ in:
# juice.compare.metadata)
IGNORED = {"params.run_id", "params.repetition", "params.seed", "params.source", "params.task",
           "params.study", "deployment.ports", "host.hostname"}
# identity: what differs between any two runs of one configuration (dotted, as IGNORED)
IDENTITY: frozenset[str] = frozenset({*IGNORED, "params.seed", "params.study", "params.workload",
                                      "params.run", "params.run_key"})
# measurements and wiring kept among a manifest's facts (timings, memory, addresses, ports):
# never configuration, wherever they stand (any component of a field's path)
NOT_CONFIG: frozenset[str] = frozenset({
    "timings", "timings_s", "memory", "discovered", "prewarm", "bus_up_s", "seconds", "url", "ports",
    "port", "pid", "started_at", "finished_at", "populate_s", "load_avg_before"})
# spec fields that name or describe a spec, or judge its runs, without changing what they measure
SPEC_IDENTITY: frozenset[str] = frozenset({"name", "description", "results", "repetitions", "seed",
                                           "sla", "workload"})
MAX_NOTES = 6
MAX_NAMES = 3

Value = str | int | float | bool | None
T = TypeVar("T")


# ------------------------------------------------------------------------------- fields


def norm(v: object) -> Value:
    """A value as the key compares it: NaN and None alike, 2.0 as 2, lists and mappings as
    their JSON text (keys sorted)."""
    if v is None:
        return None
    if isinstance(v, bool | str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return int(v) if v.is_integer() else float(v)
    if isinstance(v, Mapping | list | tuple):
        return json.dumps(v, sort_keys=True, default=str)
    try:
        if pd.isna(v):  # type: ignore[call-overload]  # any scalar: pd.NA, NaT, numpy NaN
            return None
    except (TypeError, ValueError):
        pass
    item = getattr(v, "item", None)  # numpy scalars
    return norm(item()) if callable(item) else str(v)


def _flat(v: object, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], object]]:
    if isinstance(v, Mapping):
        for k, x in v.items():
            yield from _flat(x, (*path, str(k)))
    else:
        yield path, v


def _deviations(devs: object) -> dict[str, object]:
    """``deviations`` (a list of {server, option, value...}) as ``deviations.<server> <option>``."""
    out: dict[str, object] = {}
    for d in devs if isinstance(devs, list) else []:
        if isinstance(d, Mapping) and "server" in d and "option" in d:
            out[f"deviations.{d['server']} {d['option']}"] = d.get("value")
    return out


def fields(manifest: Mapping[str, object], sections: Sequence[str] = SECTIONS) -> dict[str, object]:
    """The run's recorded configuration, flattened: ``params`` by their own names first, then
    every other section of ``sections`` dotted (identity fields and measurements left out)."""
    out: dict[str, object] = {}
    for s in sections:
        v = manifest.get(s)
        if v is None:
            continue
        if s == "deviations":
            out.update(_deviations(v))
            continue
        for path, x in _flat(v, (s,)):
            name = ".".join(path)
            if name in IDENTITY or any(p in NOT_CONFIG for p in path[1:]):
                continue
            if s == "params":
                name = ".".join(path[1:])
            out[name] = json.dumps(x, sort_keys=True, default=str) if isinstance(x, list | tuple) else x
    return out


def key_fields(rows: Sequence[Mapping[str, object]], base: Sequence[str] = (),
               candidates: Sequence[str] | None = None) -> list[str]:
    """The fields beyond ``base`` (of ``candidates``, default every field of ``rows`` in order of
    first appearance) that split runs the key so far pools, in that order."""
    order = list(candidates) if candidates is not None else list(dict.fromkeys(k for r in rows for k in r))
    codes: list[tuple[Value, ...]] = [tuple(norm(r.get(b)) for b in base) for r in rows]
    n = len(set(codes))
    out: list[str] = []
    for f in order:
        if f in base or f in out:
            continue
        new = [(*c, norm(r.get(f))) for c, r in zip(codes, rows, strict=True)]
        m = len(set(new))
        if m > n:
            out.append(f)
            codes, n = new, m
    return out


def label(values: Mapping[str, object]) -> str:
    """``compute_isolation=fork, nodes_per_process=20`` (absent values as ``–``)."""
    return ", ".join(f"{k}={'–' if norm(v) is None else norm(v)}" for k, v in values.items())


# -------------------------------------------------------------------------------- frames


def run_column(run: pd.Series, values: Mapping[str, object]) -> pd.Series:  # type: ignore[type-arg]
    """A run-constant column for a frame whose ``run`` column is ``run``: numbers when every
    value is one, text otherwise, NaN/None where a run has no value."""
    vals = {str(k): norm(v) for k, v in values.items()}
    present = [v for v in vals.values() if v is not None]
    runs = run.astype(str).tolist()
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        nums = [float(x) if isinstance(x := vals.get(r), int | float) else math.nan for r in runs]
        return pd.Series(nums, index=run.index, dtype=float)
    text = [None if (x := vals.get(r)) is None else str(x) for r in runs]
    return pd.Series(text, index=run.index, dtype=object)


def split(df: pd.DataFrame, candidates: Sequence[str], handled: Sequence[str] = ()
          ) -> list[tuple[str, pd.DataFrame]]:
    """``df`` (runs, or iterations of runs) in groups that no finding may pool: by the fields of
    ``candidates`` that split its rows beyond those of ``handled`` (which the caller compares
    itself), each with its label; ``[("", df)]`` when nothing splits it."""
    cands = [c for c in candidates if c in df.columns]
    base = [c for c in handled if c in df.columns]
    if df.empty or not cands:
        return [("", df)]
    cols = df[list(dict.fromkeys([*base, *cands]))]
    try:
        combos = cols.drop_duplicates()
    except TypeError:  # unhashable cells (lists): compare their JSON text
        cols = cols.astype(object).map(norm)
        combos = cols.drop_duplicates()
    rows = [{str(k): v for k, v in r.items()} for r in combos.to_dict("records")]
    by = key_fields(rows, base, cands)
    if not by:
        return [("", df)]
    out: list[tuple[tuple[tuple[int, float, str], ...], str, pd.DataFrame]] = []
    for k, pos in cols.groupby(by, dropna=False, sort=False, observed=True).indices.items():
        k = k if isinstance(k, tuple) else (k,)
        out.append((tuple(_order(v) for v in k), label(dict(zip(by, k, strict=True))), df.iloc[pos]))
    return [(lab, g) for _, lab, g in sorted(out, key=lambda x: x[0])]


def _order(raw: object) -> tuple[int, float, str]:
    """Numbers by value, then text, absent last."""
    v = norm(raw)
    if v is None:
        return (2, 0.0, "")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def relabel(groups: Sequence[tuple[str, pd.DataFrame]], fn: Callable[[pd.DataFrame], list[T]],
            prefix: Callable[[T, str], T]) -> list[T]:
    """``fn`` over each group of :func:`split`, each result passed through ``prefix`` with its
    group's label when there are several groups (one group: ``fn(df)`` unchanged)."""
    if len(groups) == 1:
        return fn(groups[0][1])
    return [prefix(x, lab) for lab, g in groups for x in fn(g)]


# --------------------------------------------------------------------------------- notes


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def _singular(k: str) -> str:
    return k[:-1] if k.endswith("s") else k


def _spec_diff(mans: Sequence[Mapping[str, object]], recorded: set[str]) -> dict[str, list[Value]]:
    """Spec fields that differ between ``mans`` (those that have a spec), leaving out what names
    a spec (:data:`SPEC_IDENTITY`), what their params or other recorded fields hold (an axis,
    e.g. ``delay_ms: [0, 50]``, differs between specs whose runs share their value)."""
    specs = [m["spec"] for m in mans if isinstance(m.get("spec"), Mapping)]
    if len(specs) < 2:
        return {}
    params = {k for m in mans for k in _map(m.get("params"))}
    flat = [{".".join(p): norm(v) for p, v in _flat(s, ()) if p and p[0] not in SPEC_IDENTITY} for s in specs]
    out: dict[str, list[Value]] = {}
    for k in dict.fromkeys(k for f in flat for k in f):
        leaf = k.rsplit(".", 1)[-1]
        if (leaf in params or _singular(leaf) in params or _singular(k.split(".")[0]) in params
                or any(r == k or r.endswith("." + k) for r in recorded)):
            continue
        vals = list(dict.fromkeys(f.get(k) for f in flat))
        if len(vals) > 1:
            out[k] = vals
    return out


def _map(v: object) -> Mapping[str, object]:
    return v if isinstance(v, Mapping) else {}


def _run_key(m: Mapping[str, object]) -> str | None:
    p = _map(m.get("params"))
    key = m.get("run_key") or m.get("key") or p.get("run_id")
    return str(key) if key else None


def _group_notes(idx: list[int], manifests: Sequence[Mapping[str, object]], recorded: set[str],
                 names: Sequence[str]) -> list[str]:
    mans = [manifests[i] for i in idx]
    who = [names[i] for i in idx]
    out: list[str] = []
    diff = _spec_diff(mans, recorded)
    if diff:
        what = "; ".join(f"{k} ({' / '.join('–' if v is None else str(v) for v in vals)})"
                         for k, vals in list(diff.items())[:4])
        out.append(f"Runs {_names(who)} share every recorded field but were made from specs that differ "
                   f"in {what}: they are pooled in one configuration.")
    else:
        by_rep: dict[tuple[Value, Value], set[str]] = {}
        for m in mans:
            p = _map(m.get("params"))
            key = _run_key(m)
            if key:
                rep = (norm(p.get("repetition", m.get("repetition"))), norm(p.get("study")))
                by_rep.setdefault(rep, set()).add(key)
        if any(len(v) > 1 for v in by_rep.values()):
            out.append(f"Runs {_names(who)} share every recorded field, yet their run keys differ at the "
                       "same repetition (the study hashed something their records do not show): they "
                       "are pooled in one configuration.")
    versions = sorted({str(m["juice"]) for m in mans if m.get("juice")})
    if len(versions) > 1:
        out.append(f"Runs {_names(who)}, pooled in one configuration, were made by different Juice "
                   f"versions ({', '.join(versions)}).")
    return out


def unrecorded(manifests: Sequence[Mapping[str, object]], rows: Sequence[Mapping[str, object]],
               key: Sequence[str], names: Sequence[str]) -> list[str]:
    """Sentences naming the runs a key (``key``, over ``rows``) pools although their manifests
    say they may differ, or that record no parameters ([] when none)."""
    out: list[str] = []
    bare = [n for m, n in zip(manifests, names, strict=True) if not m.get("params")]
    if bare:
        out.append(f"{len(bare)} run(s) record no parameters ({_names(bare)}): what they ran is "
                   "unknown, and they are pooled with any run their other fields match.")
    groups: dict[tuple[Value, ...], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(tuple(norm(r.get(k)) for k in key), []).append(i)
    recorded = {k for r in rows for k in r}
    for idx in groups.values():
        if len(idx) > 1:
            out += _group_notes(idx, manifests, recorded, names)
    if len(out) > MAX_NOTES:
        out = [*out[:MAX_NOTES], f"... and {len(out) - MAX_NOTES} more such groups."]
    return out


def notes_html(extra: Sequence[str], notes: Sequence[str]) -> str:
    """The report's sentences: which recorded fields joined the study's own configuration (they
    differ between these runs) and which runs are pooled though they may differ ("" when none)."""
    parts = []
    if extra:
        parts.append("<p class=note>Also part of the configuration here (recorded fields that differ "
                     "between these runs): " + ", ".join(f"<code>{escape(f)}</code>" for f in extra)
                     + ".</p>")
    if notes:
        parts.append("<p class=note><b>Pooled though they may differ:</b> "
                     + " ".join(escape(n) for n in notes) + "</p>")
    return "".join(parts)


def attach(df: pd.DataFrame, mans: Sequence[Mapping[str, object]], cands: Sequence[Mapping[str, object]],
           base: Sequence[str]) -> pd.DataFrame:
    """``df`` (one row per run, in ``mans``' order) with a column for every recorded field of
    ``cands`` beyond ``base`` that tells its runs apart (hashable values: lists as their JSON
    text), listed in ``df.attrs["config_extra"]``, and the runs pooled though they may differ
    in ``df.attrs["config_notes"]``."""
    extra = key_fields(list(cands), [b for b in base if b in df.columns])
    for f in extra:
        df[f] = [norm(c.get(f)) for c in cands]
    df.attrs["config_extra"] = extra
    df.attrs["config_notes"] = unrecorded(list(mans), list(cands), [*base, *extra], list(df["run"]))
    return df


def extra_of(df: pd.DataFrame) -> list[str]:
    """The recorded fields beyond a study's own key that tell ``df``'s runs apart (``attach``)."""
    return [f for f in df.attrs.get("config_extra", []) if f in df.columns]
