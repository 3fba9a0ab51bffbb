"""A table cell as text, the same in terminal tables (``juice analyze``) and HTML reports.

    fmt(50.0)          # "50"
    fmt(0.123456)      # "0.1235"
    fmt(float("nan"))  # "n/a"
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def fmt(v: object, digits: int = 4, na: str = "n/a") -> str:
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
