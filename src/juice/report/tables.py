"""HTML tables for reports: every cell escaped, numbers formatted, NULL shown as ``na``.

    table_html(describe(df, by=["rdbms"]))   # '<table class="data"><thead>...'
"""

from __future__ import annotations

from html import escape

import pandas as pd

from juice.util.cells import fmt

__all__ = ["fmt", "table_html"]


def table_html(df: pd.DataFrame, na: str = "–", digits: int = 4, index: bool = False,
               classes: str = "data") -> str:
    """``df`` as an HTML ``<table>`` (numeric columns right-aligned)."""
    if index:
        df = df.reset_index()
    cols = [str(c) for c in df.columns]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
               for c in df.columns]
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = []
    for row in df.itertuples(index=False, name=None):
        cells = "".join(f'<td class="num">{escape(fmt(v, digits, na))}</td>' if num
                        else f"<td>{escape(fmt(v, digits, na))}</td>"
                        for v, num in zip(row, numeric, strict=True))
        body.append(f"<tr>{cells}</tr>")
    return (f'<table class="{escape(classes)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")
