"""Nova's per-phase findings and seed-004 rows come from the traced phases: the dominant phase
and the level it starts at follow the data; the traced fixture runs fill the phase rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from juice.report import seeds as S
from juice.studies.nova import seeds as nova_seeds
from juice.studies.nova.findings import phase_findings
from juice.trace.report import phase_means
from juice.trace.tables import trace

TRACES = Path(__file__).parents[2] / "fixtures" / "trace"


def _means(claim: list[float]) -> pd.DataFrame:
    levels = [5, 10, 20, 40, 60][:len(claim)]
    m = pd.DataFrame({"api": 0.2, "scheduler": 0.5, "claim": claim, "spawn": 0.3}, index=levels)
    m.index.name = "concurrency"
    return m


def test_the_dominant_phase_and_where_it_starts_follow_the_data() -> None:
    f = phase_findings(_means([0.1, 0.2, 0.4, 1.5, 3.0]))
    assert len(f) == 1 and f[0].text.startswith("The claim phase dominates above 20 concurrent boots")
    assert "the scheduler phase below" in f[0].text and "75 % of a boot at 60" in f[0].text
    later = phase_findings(_means([0.1, 0.2, 0.4, 0.45, 3.0]))
    assert later[0].text.startswith("The claim phase dominates above 40 concurrent boots")
    always = phase_findings(_means([1.0, 1.2, 1.4, 1.5, 3.0]))
    assert "at every concurrency traced, 5 to 60" in always[0].text
    assert phase_findings(pd.DataFrame()) == []


def test_traced_runs_fill_the_phase_rows_of_seed_004() -> None:
    t = trace([TRACES / "boot", TRACES / "novalidhost"], workers=1)
    m = phase_means(t.boots)
    rows = {r.id: r for r in nova_seeds._phases(t.boots)}
    assert set(rows) == {"s004.api_below_scheduler", "s004.scheduler_grows", "s004.dominant_phase"}
    above = [x for x, r in m.iterrows() if r["api"] > r["scheduler"]]
    assert (rows["s004.api_below_scheduler"].verdict == S.SAME) == (not above)
    top = str((m.iloc[-1] / m.iloc[-1].sum()).idxmax())
    assert str(rows["s004.dominant_phase"].juice).startswith(f"{top}: ")
    grow = rows["s004.scheduler_grows"]
    assert grow.verdict in (S.SAME, S.DIFFERENT, S.UNDECIDED) and "at 2 →" in str(grow.juice)
    rates = nova_seeds._rates(t.summary)
    assert rates is not None and rates.id == "s004.fixed_failures" and "traced" in str(rates.juice)


def test_schedulers_are_compared_only_where_both_counts_ran(tmp_path: Path) -> None:
    from juice.studies.nova import report as nova_report
    from tests.report.synth import nova_results

    df = nova_report.load([nova_results(tmp_path / "n", sched_effect=-1.0)])
    top = df["concurrency"].max()
    lone = df[~((df["concurrency"] == top) & (df["schedulers"] == df["schedulers"].max()))]
    m = nova_seeds._schedulers(lone)  # the top level ran with one scheduler only: the next one is used
    assert m is not None and f"{df['concurrency'].nlargest(len(df)).unique()[1]:g} concurrent" in str(m.juice)
    assert nova_seeds._schedulers(df[df["schedulers"] == 1]) is None
