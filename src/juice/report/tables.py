"""HTML tables for reports: every cell escaped, numbers formatted, NULL shown as ``na``.

    table_html(describe(df, by=["rdbms"]))   # '<table class="data"><thead>...'
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

import numpy as np
import pandas as pd


def fmt(v: Any, digits: int = 4, na: str = "n/a") -> str:
    """A cell as text: integral floats without decimals (50.0 -> "50"), others with
    ``digits`` significant digits, NULL/NaN as ``na``."""
    if v is None or v is pd.NA or (isinstance(v, float | np.floating) and math.isnan(float(v))):
        return na
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        f = float(v)
        if f.is_integer() and abs(f) < 1e15:
            return str(int(f))
        tiny = f != 0.0 and abs(f) < 0.5 * 10.0 ** -digits  # would print as 0.0000
        return f"{f:.{digits}g}" if tiny or abs(f) >= 1e5 else f"{f:.{digits}f}"
    return str(v)


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
