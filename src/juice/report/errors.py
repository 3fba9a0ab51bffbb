"""The servers' errors section of a report: their WARNING/ERROR/CRITICAL lines during the runs,
by message template, summed over runs (the rows: ``juice.trace.logerrors``, kept in each run's
``server-errors.json``).

    html = error_table_html([(run, rows), ...], "Servers: WARNING/ERROR lines by message template")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape

import pandas as pd

from juice.report.tables import table_html
from juice.trace.logerrors import summed


def error_table_html(runs: Iterable[tuple[str, Sequence[Mapping[str, object]]]], title: str,
                     limit: int = 25) -> list[str]:
    """The report's table of server errors summed over ``runs`` ([] when none logged any)."""
    rows = summed(runs)
    if not rows:
        return []
    cols = ["component", "level", "template", "count", "runs", "logs", "cause", "example"]
    df = pd.DataFrame(rows)[cols].head(limit)
    more = (f" The {len(rows) - limit} less frequent templates are in each run's manifest "
            "(<code>server_errors</code>)." if len(rows) > limit else "")
    return [f"<h3>{escape(title)}</h3>",
            "<p class=note>The servers' own WARNING/ERROR/CRITICAL lines during the runs (oslo.log "
            "and gunicorn), from the log slices each run keeps in <code>logs/</code>, by message "
            f"template (ids, numbers and quoted values removed).{more}</p>", table_html(df)]
