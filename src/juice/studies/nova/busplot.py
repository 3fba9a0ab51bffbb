"""RabbitMQ along each nova run (seed 004 §3.5, Figure 3-5: "the deliver-rate and receive-rate of
RabbitMQ start to rise after the first request leaves nova-api"): the broker's own message
rates and queue depth, sampled during the run (``services.mqstats``: rabbitmq.parquet)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from juice.report.figures import PALETTE, figure_html, new_figure
from juice.report.layout import fit_table

MAX_TILES = 6


def frames(df: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(run, label, rabbitmq.parquet) of the runs that have one."""
    out = []
    for _, r in df.iterrows():
        f = Path(str(r["dir"])) / "rabbitmq.parquet"
        if f.is_file():
            load = f"c{r['concurrency']}" if pd.notna(r.get("concurrency")) else ""
            out.append((str(r["run"]), f"{r.get('configuration') or ''} {r['scenario'].split('.')[-1]} "
                        f"{r['db']} s{r['schedulers']} {load}".strip(), pd.read_parquet(f)))
    return out


def section(df: pd.DataFrame) -> list[str]:
    runs = frames(df)
    if not runs:
        return []
    rows = []
    for run, label, f in runs:
        rows.append({"run": run, "what": label, "samples": len(f),
                     "received/s (peak)": f["received_per_s"].max(),
                     "delivered/s (peak)": f["delivered_per_s"].max(),
                     "redelivered (total)": float((f["redelivered_per_s"].fillna(0)
                                                   * f["t"].diff().fillna(f["t"])).sum()),
                     "ready (peak)": f["ready"].max(), "unacked (peak)": f["unacked"].max()})
    shown = runs[:MAX_TILES]
    fig = new_figure(3.0 * len(shown), 2.8, bottom=0.7)
    for i, (_, label, f) in enumerate(shown):
        ax = fig.add_subplot(1, len(shown), i + 1)
        ax.plot(f["t"], f["received_per_s"], color=PALETTE[0], label="received/s")
        ax.plot(f["t"], f["delivered_per_s"], color=PALETTE[1], label="delivered/s")
        depth = ax.twinx()
        depth.plot(f["t"], f["ready"], color=PALETTE[2], linestyle="--", label="ready")
        ax.set_title(label[:40], fontsize=7)
        ax.set_xlabel("s into the run", fontsize=7)
        if i == 0:
            ax.legend(fontsize=6, loc="upper left")
            depth.legend(fontsize=6, loc="upper right")
    more = f" (the first {MAX_TILES} of {len(runs)} drawn)" if len(runs) > MAX_TILES else ""
    return ["<h3>RabbitMQ during each run (seed 004, Figure 3-5)</h3>",
            "<p class=note>From the brokers themselves (the <code>rabbitmq_prometheus</code> plugin, "
            "sampled every 2 s, summed over the nodes): messages received from publishers and "
            "delivered to consumers per second, and messages ready in the queues (dashed, right "
            f"axis){more}.</p>",
            fit_table(pd.DataFrame(rows), digits=2, title="rabbitmq"),
            figure_html(fig, "RabbitMQ's receive and deliver rates and queue depth along each run")]
