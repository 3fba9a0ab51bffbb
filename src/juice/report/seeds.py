"""The seed beside Juice: each study ships the published values of its seed(s) as reference
data (``seed.yaml`` in the study's package), and its report shows them next to the matching
Juice measurement, the conditions that differ and a verdict per row.

    refs = load_references("juice.studies.keystone")      # the study's seed.yaml, validated
    m = Match("rw.authenticate", juice="96.5 / 3.52 (8 runs)", verdict=SAME, reason="…")
    html = seed_table("Keystone", refs, [m, ...], juice_conditions(manifests))

A reference row: ``id``, ``what``, ``seed`` (the seed's number, e.g. "000"), ``source`` (figure,
table or section of the seed), ``conditions`` (the seed's), ``value`` (as published), ``approx``
(read off a plot: shown with ≈) and ``numbers`` (machine-usable values the study compares with).
A row the study has no match for says "not measured here": a number is never invented.
Verdicts compare shapes and ratios: absolute values of one small host and of the seed's
clusters cannot match, and the table says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from importlib import resources

import numpy as np
import pandas as pd
import yaml

from juice.report.findings import CONFOUNDED, NO_INTERVAL, ONE_RUN, Contrast
from juice.report.layout import boxed
from juice.report.tables import table_html

SAME = "same shape"
DIFFERENT = "different"
NOT_MEASURED = "not measured in these results"
CONTEXT = "context only"      # an absolute value shown for scale: no shape to compare
UNDECIDED = "no verdict"      # measured, but the data decide nothing (too few values, …)
VERDICTS = (SAME, DIFFERENT, NOT_MEASURED, CONTEXT, UNDECIDED)
NOT_HERE = "not measured here"
FILE = "seed.yaml"
REQUIRED = ("id", "what", "seed", "source", "conditions", "value")


@dataclass(frozen=True)
class Reference:
    """One published value of a seed."""

    id: str
    what: str
    seed: str
    source: str
    conditions: str
    value: str
    approx: bool = False
    numbers: Mapping[str, float] = field(default_factory=dict)
    file: str = ""
    setting: str = ""  # the seed's conditions common to all its rows (hardware, versions, scale)

    def seed_text(self) -> str:
        """"≈66 % local (seed 003, slide 36)"."""
        return f"{'≈' if self.approx else ''}{self.value} (seed {self.seed}, {self.source})"


@dataclass(frozen=True)
class Match:
    """The Juice side of one reference row; ``juice`` None: not measured in these results."""

    id: str
    juice: str | None
    verdict: str
    reason: str = ""
    conditions: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r}: one of {', '.join(VERDICTS)}")


def plain(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its categorical columns as plain ones (numbers stay numbers): results read
    from parquet keep the axes as categories, which neither order nor take new values."""
    out = df.copy()
    for c in out.columns:
        col = out[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            numeric = pd.api.types.is_numeric_dtype(col.cat.categories.dtype)
            out[c] = col.astype(float) if numeric else col.astype(object)
    return out


def guarded(title: str, build: Callable[[], str]) -> str:
    """The seed block ``build`` makes, or a note saying why it could not be made: the block
    compares with published values and must never cost a report its other sections."""
    try:
        return build()
    except Exception as e:  # a comparison this data cannot feed: said in the report
        return (f"<p class=note>The seed beside Juice ({escape(title)}): not computed here "
                f"({escape(type(e).__name__)}: {escape(str(e)[:200])}).</p>")


def load_references(package: str) -> list[Reference]:
    """The reference rows of ``package``'s ``seed.yaml`` (see ``parse_references``)."""
    text = resources.files(package).joinpath(FILE).read_text(encoding="utf-8")
    return parse_references(text, f"{package}/{FILE}")


def parse_references(text: str, where: str = FILE) -> list[Reference]:
    """The reference rows of a ``seed.yaml`` text; ValueError naming the row and what it lacks
    when one is incomplete, names a seed not under ``seeds:``, or repeats an id."""
    doc = yaml.safe_load(text) or {}
    seeds = {str(k): (v or {}) for k, v in (doc.get("seeds") or {}).items()}
    files = {k: str(v.get("file", "")) for k, v in seeds.items()}
    out: list[Reference] = []
    seen: set[str] = set()
    for i, row in enumerate(doc.get("rows") or []):
        missing = [k for k in REQUIRED if not str(row.get(k, "")).strip()]
        if missing:
            raise ValueError(f"{where}: row {i + 1} ({row.get('id', '?')}) lacks {', '.join(missing)}")
        seed = str(row["seed"])
        if not files.get(seed):
            raise ValueError(f"{where}: row {row['id']}: seed {seed!r} has no file under 'seeds:'")
        if row["id"] in seen:
            raise ValueError(f"{where}: row id {row['id']!r} twice")
        seen.add(str(row["id"]))
        out.append(Reference(id=str(row["id"]), what=str(row["what"]), seed=seed,
                             source=str(row["source"]), conditions=str(row["conditions"]),
                             value=str(row["value"]), approx=bool(row.get("approx", False)),
                             numbers={str(k): float(v) for k, v in (row.get("numbers") or {}).items()},
                             file=files[seed], setting=str(seeds[seed].get("conditions", ""))))
    return out


def by_id(refs: Sequence[Reference]) -> dict[str, Reference]:
    return {r.id: r for r in refs}


# ---- verdicts --------------------------------------------------------------------------------

def trend(c: Contrast, expect: str, what: str = "") -> tuple[str, str]:
    """(verdict, reason) of a contrast ``b`` vs ``a`` against the seed's direction
    (``expect``: "up" = b larger, "down" = b smaller, "flat" = within noise or under 1.5×)."""
    if c.verdict == NO_INTERVAL:
        return UNDECIDED, "too few values for an interval"
    if c.verdict == ONE_RUN:
        return UNDECIDED, (f"{what}{c.ratio_text}, but one run a side: the run-to-run variation is "
                           "unknown (repeat the runs: repetitions >= 2)")
    if c.verdict == CONFOUNDED:
        return UNDECIDED, (f"{what}{c.ratio_text}, but confounded with run order (every run of one "
                           "side ran before the other's)")
    r = c.ratio
    if expect == "flat":
        if not c.real or (np.isfinite(r) and 1 / 1.5 <= r <= 1.5):
            return SAME, f"{what}{c.ratio_text}: close to 1"
        return DIFFERENT, f"{what}{c.ratio_text}: far from the seed's near-equality"
    if not c.real:
        return DIFFERENT, f"{what}no difference beyond noise here ({c.ratio_text})"
    up = np.isfinite(r) and r > 1
    if up == (expect == "up"):
        return SAME, f"{what}{c.ratio_text}, the seed's direction"
    return DIFFERENT, f"{what}{c.ratio_text}: the opposite direction"


def near(value: float, ref: float, tol: float) -> bool:
    return bool(np.isfinite(value) and abs(value - ref) <= tol)


# ---- the Juice side's conditions ---------------------------------------------------------------

_VERSION = re.compile(r"^(.*)_version$")
_NUMBER = re.compile(r"\d+(?:\.\d+)+(?:[-+~.\w]*)?")


def _short_version(v: object) -> str:
    """"mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for …" -> "10.11.19-MariaDB-0+deb12u1"."""
    m = _NUMBER.search(str(v))
    return m.group(0) if m else str(v)[:24]


def remote_hosts(m: Mapping[str, object], depth: int = 0) -> list[Mapping[str, object]]:
    """The SSH hosts a run's lab recorded (a ``provider`` mapping's ``hosts`` list, wherever the
    study keeps it in its manifest); [] for the local lab."""
    if depth > 4:
        return []
    for k, v in m.items():
        if not isinstance(v, Mapping):
            continue
        if k == "provider" and v.get("provider") != "local" and isinstance(v.get("hosts"), list):
            return [h for h in hs if isinstance(h, Mapping)] if isinstance(hs := v.get("hosts"), list) else []
        found = remote_hosts(v, depth + 1)
        if found:
            return found
    return []


def juice_conditions(manifests: Sequence[Mapping[str, object]]) -> str:
    """What Juice's runs record about hardware, versions and scale, in one line: hosts (and
    their CPUs/memory), component versions, the Juice version."""
    hosts: dict[str, Mapping[str, object]] = {}
    versions: dict[str, set[str]] = {}
    juice: set[str] = set()
    for m in manifests:
        h = m.get("host")
        remote = remote_hosts(m)
        if remote:  # sites on SSH hosts: those hosts (the driver's host is not a site)
            for hs in remote:
                hosts[str(hs.get("address") or hs.get("hostname"))] = {**hs, "cpus": hs.get("nproc", "?")}
        elif isinstance(h, Mapping):
            hosts[str(h.get("hostname", len(hosts)))] = h
        v = m.get("versions")
        if isinstance(v, Mapping):
            for k, x in v.items():
                versions.setdefault(str(k), set()).add(_short_version(x))
        dep = m.get("deployment")
        if isinstance(dep, Mapping):
            for k, x in dep.items():
                mm = _VERSION.match(str(k))
                if mm and x:
                    versions.setdefault(mm.group(1), set()).add(_short_version(x))
        facts = m.get("facts")
        if isinstance(facts, Mapping):
            for k in ("oslo_messaging", "nova", "rabbitmq", "nats"):
                if facts.get(k):
                    versions.setdefault(k, set()).add(_short_version(facts[k]))
        if m.get("juice"):
            juice.add(str(m["juice"]))
    parts = []
    if hosts:
        cpus = sorted({str(h.get("cpus", "?")) for h in hosts.values()})
        mem = sorted({str(h.get("mem_gib", "?")) for h in hosts.values()})
        n = len(hosts)
        mem_text = "" if mem == ["?"] else f", {'/'.join(mem)} GiB"
        parts.append(f"{n} host{'s' if n != 1 else ''} ({'/'.join(cpus)} CPUs{mem_text}"
                     + (", every site on it" if n == 1 else "") + ")")
    else:
        parts.append("host not recorded")
    if versions:
        parts.append(", ".join(f"{k} {'/'.join(sorted(v))}" for k, v in sorted(versions.items())[:8]))
    if juice:
        parts.append(f"juice {'/'.join(sorted(juice))}")
    return "; ".join(parts)


# ---- the table -------------------------------------------------------------------------------

NOTE = ("Seed values are transcribed from the seed's text (≈: read off a plot or a slide, "
        "approximate). Absolute values of this lab and of the seed's clusters cannot match (other "
        "hardware, versions and scale): the verdict compares shapes and ratios — <i>same shape</i>, "
        "<i>different</i> (with the reason when known), <i>not measured in these results</i>, or "
        "<i>context only</i> (an absolute value shown for scale).")


def rows(refs: Sequence[Reference], matches: Sequence[Match]) -> pd.DataFrame:
    """One row per reference: what, seed (source), Juice, conditions, verdict (reason)."""
    got = {m.id: m for m in matches}
    unknown = [m.id for m in matches if m.id not in {r.id for r in refs}]
    if unknown:
        raise ValueError(f"matches for unknown reference rows: {', '.join(unknown)}")
    out = []
    for r in refs:
        m = got.get(r.id)
        if m is None or m.juice is None:
            juice, verdict = NOT_HERE, NOT_MEASURED
            reason = m.reason if m is not None else ""
            cond = m.conditions if m is not None else ""
        else:
            juice, verdict, reason, cond = m.juice, m.verdict, m.reason, m.conditions
        out.append({"what": r.what, "seed": r.seed_text(), "Juice": juice,
                    "conditions (seed · Juice)": f"seed: {r.conditions}" + (f" · Juice: {cond}" if cond
                                                                             else ""),
                    "verdict": verdict + (f": {reason}" if reason else "")})
    return pd.DataFrame(out, columns=["what", "seed", "Juice", "conditions (seed · Juice)", "verdict"])


def counts(table: pd.DataFrame) -> dict[str, int]:
    """Rows per verdict (in VERDICTS order, those present)."""
    first = table["verdict"].str.split(":").str[0] if not table.empty else pd.Series(dtype=str)
    return {v: int((first == v).sum()) for v in VERDICTS if (first == v).any()}


def seed_table(title: str, refs: Sequence[Reference], matches: Sequence[Match],
               conditions: str) -> str:
    """The "Seed vs Juice" block of a study section ("" without reference rows)."""
    if not refs:
        return ""
    t = rows(refs, matches)
    n = counts(t)
    settings = "".join(dict.fromkeys(
        f"<li>Seed {escape(r.seed)} ({escape(r.file)}): {escape(r.setting or 'conditions not stated')}</li>"
        for r in refs))
    tally = ", ".join(f"{k} {v}" for k, v in n.items())
    return (f'<section class=seeds data-title="{escape(title, quote=True)}" '
            f'data-tally="{escape(tally, quote=True)}"><h3>The seed beside Juice</h3>'
            f"<p class=note>{NOTE}</p><ul class=note>{settings}<li>Juice: {escape(conditions)}</li></ul>"
            f"{boxed(table_html(t, classes='data seeds'))}"
            f"<p class=note>Verdicts: {escape(tally)}.</p></section>")


CSS = """
table.seeds{font-size:12px;width:100%;table-layout:fixed}table.seeds td{max-width:none}
section.seeds{margin:1em 0}
"""
