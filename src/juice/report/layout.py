"""Tables that fit the page: parameters constant across a table are stated once above it,
levels are sorted by value ("5 (peak)" before "20 (peak)"), run ids are shortened with a
legend, long tables fold, and every table sits in a box no wider than the page. The CSS below
applies to every table of a report: cells wrap, but never narrower than a few characters (no
column of one character per line), and numbers never break.

    html = fit_table(df, runs="run", digits=3, title="Per configuration")
    df = sort_levels(df, ["concurrency"])            # natural order of numbers in text
    df, legend = short_runs(df, "run")               # r1, r2, ... and a folded legend
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

import pandas as pd

from juice.report.tables import fmt, table_html

FOLD_ROWS = 15  # tables with more rows fold (a <details> showing the count)
WIDE_ROW = 8    # a one-row table with more columns is shown as field / value lines

_NUM = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def natural_key(v: object) -> tuple[int, float, str]:
    """Numbers (and texts starting with one) by value, before other texts; NaN last."""
    if v is None or (isinstance(v, float) and v != v):
        return (2, 0.0, "")
    if isinstance(v, bool):
        return (1, 0.0, str(v))
    if isinstance(v, int | float):
        return (0, float(v), "")
    m = _NUM.match(str(v))
    if m:
        return (0, float(m.group(1)), str(v)[m.end():])
    return (1, 0.0, str(v))


def sort_levels(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """``df`` sorted by ``cols`` (those it has), each in natural order (stable)."""
    cols = [c for c in cols if c in df.columns]
    if not cols or df.empty:
        return df
    keys: dict[str, list[tuple[int, float, str]]] = {c: [natural_key(v) for v in df[c]] for c in cols}
    order = sorted(range(len(df)), key=lambda i: tuple(keys[c][i] for c in cols))
    return df.iloc[order].reset_index(drop=True)


def split_constant(df: pd.DataFrame, keep: Sequence[str] = ()) -> tuple[pd.DataFrame, dict[str, object]]:
    """``df`` without its columns that hold one value in every row (when it has 2+ rows), and
    those values; ``keep``: columns never taken out."""
    if len(df) < 2:
        return df, {}
    const: dict[str, object] = {}
    for c in df.columns:
        if c in keep:
            continue
        s = df[c]
        try:
            n = s.nunique(dropna=False)
        except TypeError:  # unhashable cells
            n = s.astype(str).nunique(dropna=False)
        if n == 1:
            const[str(c)] = s.iloc[0]
    return df.drop(columns=list(const)), const


def constants_html(const: dict[str, object], lead: str = "Same in every row") -> str:
    """``<p>Same in every row: a = 1 · b = x</p>`` ("" when none)."""
    if not const:
        return ""
    items = " · ".join(f"<b>{escape(k)}</b> = {escape(fmt(v, 4, '–'))}" for k, v in const.items())
    return f"<p class=const>{escape(lead)}: {items}</p>"


def short_runs(df: pd.DataFrame, col: str = "run", prefix: str = "r") -> tuple[pd.DataFrame, str]:
    """``df`` with the ids of ``col`` replaced by r1, r2, ... (in order of appearance) and the
    legend (a folded table, ids that break anywhere); unchanged when ids are short."""
    if col not in df.columns or df.empty:
        return df, ""
    ids = list(dict.fromkeys(str(v) for v in df[col]))
    if max(len(i) for i in ids) <= 16:
        return df, ""
    short = {r: f"{prefix}{i + 1}" for i, r in enumerate(ids)}
    out = df.copy()
    out[col] = [short[str(v)] for v in df[col]]
    rows = "".join(f"<tr><td>{escape(s)}</td><td class=id>{escape(r)}</td></tr>" for r, s in short.items())
    legend = (f"<details class=legend><summary>{escape(col)} ids ({len(ids)}): "
              f"{escape(prefix)}1…{escape(prefix)}{len(ids)}</summary>"
              f"<table class=data><tbody>{rows}</tbody></table></details>")
    return out, legend


def boxed(table: str) -> str:
    """A table in a box no wider than the page (for tables kept exactly as earlier versions
    printed them: the re-render guarantee of old results compares them cell for cell)."""
    return f"<div class=tw>{table}</div>"


def fold(html: str, rows: int, title: str = "") -> str:
    """``html`` in a closed ``<details>`` when ``rows`` > FOLD_ROWS."""
    if rows <= FOLD_ROWS:
        return html
    what = escape(title) + ": " if title else ""
    return f"<details><summary>{what}{rows} rows</summary>{html}</details>"


def fit_table(df: pd.DataFrame, runs: str | None = None, digits: int = 4, sort: Sequence[str] = (),
              keep: Sequence[str] = (), title: str = "", constants: bool = True,
              lead: str = "Same in every row") -> str:
    """``df`` as a table that fits: constant columns (e.g. counts that are 0 in every row) stated
    once above it, ``sort`` columns in natural order, the ids of ``runs`` shortened (legend
    below), one wide row turned into field / value lines, folded when long, in a box that never
    widens the page."""
    if df is None or df.empty:
        return ""
    const: dict[str, object] = {}
    if constants:
        df, const = split_constant(df, keep=[*keep, *([runs] if runs else [])])
    df = sort_levels(df, sort)
    if len(df) == 1 and len(df.columns) > WIDE_ROW:  # one wide row: a field per line
        df = pd.DataFrame({"field": [str(c) for c in df.columns],
                           "value": [fmt(v, digits, "–") for v in df.iloc[0]]})
        runs = None
    legend = ""
    if runs:
        df, legend = short_runs(df, runs)
    table = boxed(table_html(df, digits=digits))
    return constants_html(const, lead) + fold(table, len(df), title) + legend


CSS = """
.tw{max-width:100%;overflow-x:auto}
table.data th{white-space:normal;vertical-align:bottom;max-width:9em;min-width:5ch;hyphens:auto}
table.data td{overflow-wrap:anywhere;max-width:28em;min-width:5ch}
table.data td.num{overflow-wrap:normal}
td.id{font-family:monospace;font-size:11px;word-break:break-all}
p.const{font-size:13px;background:#fafafa;border:1px solid #eee;padding:.2em .5em}
figure svg{max-width:100%;height:auto;display:block}
img{max-width:100%}
"""
