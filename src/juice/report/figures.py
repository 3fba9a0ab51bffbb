"""Figures for reports: stacked-bar tiles and CDFs, drawn with matplotlib's object API (no
pyplot global state, Agg/SVG canvases only), and embedded as inline SVG (self-contained).

    fig = tiles_figure("create_user_update_password, by sites", [Tile("galera", means, notes)],
                       xlabel="sites", ylabel="mean completion time (s)")
    html = figure_html(fig)     # <figure><svg ...>...</svg><figcaption>...</figure>
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")
LINESTYLES = ("-", "--", ":", "-.")
_RC = {"svg.fonttype": "none", "svg.hashsalt": None, "font.size": 9, "axes.titlesize": 10,
       "axes.spines.top": False, "axes.spines.right": False}


def figure_html(fig: Figure, caption: str | None = None, fmt: str = "svg") -> str:
    """``fig`` as one self-contained ``<figure>``: inline SVG (sharp at any zoom, scaled down
    to the page's width; its ids prefixed with a hash of the drawing, so several figures never
    clash and a re-made report is identical), or a base64 PNG ``<img>``; the figure is closed
    afterwards."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    alt = escape(caption or (fig.get_suptitle() if hasattr(fig, "get_suptitle") else "") or "figure")
    cap = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    try:
        if fmt == "svg":
            with matplotlib.rc_context({**_RC, "svg.hashsalt": "juice"}):
                # no metadata block (its creator line links to matplotlib.org: a report names no URL)
                fig.savefig(buf, format="svg", dpi=72, metadata={"Date": None, "Creator": None,
                                                                 "Format": None, "Type": None})
            return f"<figure>{inline_svg(buf.getvalue().decode('utf-8'), alt)}{cap}</figure>"
        with matplotlib.rc_context(_RC):
            fig.savefig(buf, format=fmt, dpi=110)
    finally:
        # pyplot keeps every figure it made until closed: a report of many sections leaked
        # them all ("More than 20 figures have been opened", the suite's one warning)
        plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<figure><img alt="{alt}" src="data:image/{fmt};base64,{data}">{cap}</figure>'


_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, label: str = "figure") -> str:
    """A standalone SVG document as an element to put in HTML: no XML prolog or doctype, ids
    (and the references to them) prefixed with a hash of the drawing, labelled for readers."""
    svg = svg[svg.index("<svg"):]
    prefix = "f" + hashlib.sha256(svg.encode("utf-8")).hexdigest()[:8] + "-"
    ids = set(_ID.findall(svg))
    if ids:
        alt = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
        svg = re.sub(rf'\bid="({alt})"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
        svg = re.sub(rf'#({alt})\b', lambda m: f"#{prefix}{m.group(1)}", svg)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def op_colors(ops: Sequence[str]) -> dict[str, str]:
    """A stable colour per operation (same operation, same colour, in every figure)."""
    return {op: PALETTE[i % len(PALETTE)] for i, op in enumerate(ops)}


@dataclass
class Tile:
    """One tile: a bar per row of ``means`` (index = x labels), stacked by its columns
    (operations); ``notes[i]`` is written above bar ``i`` (e.g. "λ 0.00\\nσ 0.012")."""

    title: str
    means: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def new_figure(width: float, height: float, bottom: float = 0.6, top: float = 0.45) -> Figure:
    """A figure with fixed margins in inches (no constrained layout, no tight bbox: one draw
    per figure, which keeps large reports fast)."""
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.2 / width, bottom=bottom / height,
                        top=1 - top / height, wspace=0.08)
    return fig


def tiles_figure(title: str, tiles: Sequence[Tile], xlabel: str, ylabel: str,
                 colors: dict[str, str] | None = None) -> Figure:
    """Side-by-side stacked-bar tiles sharing the y axis (the seed's per-RDBMS tiles)."""
    ops: list[str] = []
    for t in tiles:
        ops.extend(str(c) for c in t.means.columns if str(c) not in ops)
    colors = colors or op_colors(ops)
    n = max(len(tiles), 1)
    with matplotlib.rc_context(_RC):
        fig = new_figure(min(3.0 * n + 1.0, 16.0), 4.2, bottom=0.95, top=0.7)
        axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
        top = max([float(t.means.sum(axis=1).max()) for t in tiles if len(t.means)] + [0.0])
        for ax, t in zip(axes, tiles, strict=False):
            _stacked(ax, t, colors, top)
            ax.set_title(t.title)
            ax.set_xlabel(xlabel)
        axes[0].set_ylabel(ylabel)
        if top > 0:
            axes[0].set_ylim(0, top * 1.25)
        handles = [Patch(color=colors[o], label=o) for o in ops]
        if handles:
            fig.legend(handles=handles, loc="lower center", ncols=min(len(handles), 3),
                       frameon=False, fontsize=8)
        fig.suptitle(title)
    return fig


def _stacked(ax: Axes, tile: Tile, colors: dict[str, str], top: float) -> None:
    m = tile.means
    x = np.arange(len(m))
    bottom = np.zeros(len(m))
    for op in m.columns:
        vals = np.nan_to_num(m[op].to_numpy(dtype=float))
        ax.bar(x, vals, bottom=bottom, color=colors.get(str(op), "#888888"), width=0.6)
        bottom += vals
    ax.set_xticks(x, [str(i) for i in m.index])
    if len(m) == 0 or not bottom.any():
        ax.text(0.5, 0.5, "no successful iteration", ha="center", va="center", transform=ax.transAxes)
    if len(m):
        ax.set_xlim(-0.6, len(m) - 0.4)
    for i, note in enumerate(tile.notes[: len(m)]):
        ax.text(x[i], bottom[i] + max(top, 1e-9) * 0.02, note, ha="center", va="bottom", fontsize=7)


def cdf_figure(title: str, curves: Sequence[tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]],
               xlabel: str = "completion time (s)",
               styles: Sequence[tuple[int, int]] | None = None) -> Figure:
    """One step line per curve ``(label, x, P[X <= x])``; ``styles[i]`` = (colour index,
    line-style index) of curve ``i`` (e.g. colour per rdbms, style per number of sites). A log
    x axis when values span more than two decades (the seed's long tails)."""
    with matplotlib.rc_context(_RC):
        fig = new_figure(7.0, 3.8)
        ax = fig.subplots()
        lo, hi = np.inf, 0.0
        for i, (label, x, y) in enumerate(curves):
            if len(x) == 0:
                continue
            ci, si = styles[i] if styles else (i, i // len(PALETTE))
            ax.step(x, y * 100, where="post", label=label, color=PALETTE[ci % len(PALETTE)],
                    linestyle=LINESTYLES[si % len(LINESTYLES)], linewidth=1.2)
            pos = x[x > 0]
            if len(pos):
                lo, hi = min(lo, float(pos.min())), max(hi, float(pos.max()))
        if not curves or hi == 0.0:
            ax.text(0.5, 0.5, "no successful iteration", ha="center", va="center", transform=ax.transAxes)
        elif hi / lo > 100:
            ax.set_xscale("log")
        ax.set_ylim(0, 101)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("cumulative percent")
        ax.grid(True, alpha=0.3)
        if curves:
            ax.legend(loc="lower right", fontsize=7, frameon=False)
        fig.suptitle(title)
    return fig
