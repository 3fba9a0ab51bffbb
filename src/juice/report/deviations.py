"""The report's "Server settings that differ from the shipped defaults" table, in each study's
section: the ``deviations`` stored in the runs' manifests (``juice.services.deviations``),
one row per (server, option, value), with the share of the runs that ran with it; what the
spec set comes first, and a long table folds (``layout.fit_table``).

    html = section(paths, owns=lambda m: study.key_of(m) is not None, heading="h3")

Runs made before deviations were recorded (and runs against an existing cloud) have none:
the table says how many runs it covers; no run with the field, no table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from juice.results import tidy
from juice.results.samples import runs_under
from juice.services.deviations import SPEC, Deviation, stored

COLUMNS = ["server", "option", "value", "shipped default", "set by", "reason", "runs"]



def manifests(paths: Sequence[Path], owns: Callable[[Mapping[str, object]], bool] | None = None
              ) -> list[Mapping[str, object]]:
    """The manifests of the complete runs under ``paths`` (those ``owns`` accepts)."""
    out: list[Mapping[str, object]] = []
    for p in paths:
        for d in (runs_under(p) if p.is_dir() else []):
            m = tidy.manifest_or_empty(d)
            if m and (owns is None or owns(m)):
                out.append(m)
    return out


def table(runs: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """One row per deviation found in the manifests ``runs`` (what the spec set first, then
    Juice's, each in first-seen order), with ``runs`` = how many of the runs that recorded
    deviations ran with it ("all" when every one)."""
    recorded = [stored(m) for m in runs if isinstance(m.get("deviations"), list)]
    count: dict[Deviation, int] = {}
    for devs in recorded:
        for d in dict.fromkeys(devs):
            count[d] = count.get(d, 0) + 1
    rows = [{"server": d.server, "option": d.option, "value": d.value, "shipped default": d.default,
             "set by": d.source, "reason": d.reason,
             "runs": "all" if n == len(recorded) else f"{n} of {len(recorded)}"}
            for d, n in sorted(count.items(), key=lambda kv: kv[0].source != SPEC)]
    return pd.DataFrame(rows, columns=COLUMNS)


def section(paths: Sequence[Path], owns: Callable[[Mapping[str, object]], bool] | None = None,
            heading: str = "h3") -> str:
    """The table of the runs under ``paths`` ("" when none of them recorded deviations)."""
    from juice.report.layout import fit_table

    runs = manifests(paths, owns)
    with_field = sum(1 for m in runs if isinstance(m.get("deviations"), list))
    if not with_field:
        return ""
    t = table(runs)
    older = len(runs) - with_field
    note = (f" {older} runs made before settings were recorded (or against an existing cloud) "
            "are not covered." if older else "")
    head = (f"<{heading}>Server settings that differ from the shipped defaults</{heading}>"
            f"<p class=note>Every server runs with its upstream defaults except these ({with_field} "
            "runs; <i>set by</i> spec: the spec asked for it, juice: Juice changes it for the reason "
            f"given).{note}</p>")
    if t.empty:
        return head + "<p>None: every server ran with its shipped defaults.</p>"
    return head + fit_table(t, constants=False, title="server settings, the spec's first")
