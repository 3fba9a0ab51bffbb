"""The HTML report: one self-contained file, figures inline, sensible with little data."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from juice.errors import UserError
from juice.report import figure_html, register_section, table_html
from juice.report import html as report_html
from juice.studies import report as render
from tests.results.fake_runs import fake_params, write_fake_run

DATA = Path(__file__).parents[1] / "results" / "data"
IMG = re.compile(r'<img [^>]*src="data:image/(svg\+xml|png);base64,([A-Za-z0-9+/=]+)"')


def _no_external_fetch(text: str) -> None:
    lowered = text.lower()
    for bad in ("<script", "<link", "<iframe", "@import", 'src="http', "src='http", 'href="http',
                "url(http", 'src="//'):
        assert bad not in lowered, bad
    for m in re.finditer(r'(?:src|href)="([^"]*)"', text):
        assert m.group(1).startswith(("data:", "#")), m.group(1)[:60]  # or an inline SVG's own id


SVG = re.compile(r"<svg .*?</svg>", re.S)


def _svgs(text: str) -> list[ET.Element]:
    """The figures: inline SVG elements (a base64 <img> would be an older report)."""
    assert not IMG.findall(text)
    return [ET.fromstring(s) for s in SVG.findall(text)]


def test_full_matrix_report_is_one_self_contained_file(tmp_path: Path) -> None:
    root = tmp_path / "results"
    i = 0
    for rdbms in ("mariadb", "galera"):
        for sites in (3, 9):
            for delay in (0.0, 50.0):
                i += 1
                write_fake_run(root, f"r{i}", fake_params(rdbms=rdbms, sites=sites, delay_ms=delay),
                               n=20, fail_every=6, seed=i,
                               rwratio={"reads": 900, "writes": 100, "pct_reads": 90.0, "pct_writes": 10.0})
    (root / "crashed.failed").mkdir()
    out = render([root], tmp_path / "out" / "report.html")
    assert out == tmp_path / "out" / "report.html"
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # one file, no temp left
    text = out.read_text()
    _no_external_fetch(text)
    svgs = _svgs(text)
    # per scenario: bars + CDF by sites (one per delay) and by delay (one per sites count)
    assert len(svgs) == 2 * 2 + 2 * 2
    assert all(s.tag.endswith("svg") for s in svgs)
    assert "KeystoneBasic.create_user_update_password" in text
    assert "16 runs" not in text and "8 runs" in text  # provenance counts complete runs
    assert "1 failed" in text  # the skipped run is said
    assert "<h3>By sites</h3>" in text and "<h3>By one-way delay (ms)</h3>" in text
    assert "(λ 0.15, σ " in text  # 3 failed of 20 in every run: outline cells say λ
    assert "<h2>%reads / %writes</h2>" in text and '<td class="num">90</td>' in text
    assert "keystone_v3.update_user" in text and "Total" in text
    assert "version: keystone" in text and "userspace" in text
    assert "juice report" in text  # how to re-make it


def test_single_run_one_rdbms_still_renders(tmp_path: Path) -> None:
    run = write_fake_run(tmp_path, "only", fake_params(), n=5)
    text = render([run.path], tmp_path / "r.html").read_text()
    svgs = _svgs(text)
    assert len(svgs) == 2  # one bar tile, one CDF
    _no_external_fetch(text)


def test_all_failed_and_imported_rally_files_render(tmp_path: Path) -> None:
    write_fake_run(tmp_path / "res", "bad", fake_params(), n=4, fail_every=1, fail_before_actions=True)
    text = render([tmp_path / "res"], tmp_path / "a.html").read_text()
    assert "no successful iteration" in " ".join(
        ET.tostring(s, encoding="unicode") for s in _svgs(text))
    # Rally's own file: rdbms, sites and delay unknown
    text = render([DATA / "seed-table1-rally-5.1.1.json"], tmp_path / "b.html").read_text()
    assert "KeystoneBasic.create_and_list_tenants" in text and len(_svgs(text)) == 2
    _no_external_fetch(text)


def test_extra_sections_are_appended(tmp_path: Path) -> None:
    run = write_fake_run(tmp_path, "only", fake_params(), n=5)
    seen: list[Sequence[Path]] = []

    def section(paths: Sequence[Path]) -> str | None:
        seen.append(paths)
        import matplotlib.figure

        fig = matplotlib.figure.Figure()
        fig.subplots().plot([1, 2], [3, 4])
        import pandas as pd

        return "<h2>Scheduler DB</h2>" + figure_html(fig) + table_html(pd.DataFrame({"a<b": [1.5]}))

    text = render([run.path], tmp_path / "r.html", sections=[section, lambda p: None]).read_text()
    assert seen == [[run.path]]
    assert text.index("<h2>Scheduler DB</h2>") > text.index("Per operation")
    assert "a&lt;b" in text and len(_svgs(text)) == 3
    register_section(section)
    try:
        assert "Scheduler DB" in render([run.path], tmp_path / "s.html").read_text()
    finally:
        report_html._REGISTERED.remove(section)


def test_no_runs_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "x.failed").mkdir()
    with pytest.raises(UserError, match="1 failed runs skipped"):
        render([tmp_path], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_seed_like_matrix_gives_the_seeds_figures(tmp_path: Path) -> None:
    """Sites 3/9/45 at 0 ms and delays 0/50/150 ms at 9 sites: one figure pair by sites (at
    0 ms) and one by delay (at 9 sites), as the seed; no single-bar figure of one point."""
    points = [(3, 0.0), (9, 0.0), (45, 0.0), (9, 50.0), (9, 150.0)]
    i = 0
    for rdbms in ("mariadb", "galera"):
        for sites, delay in points:
            i += 1
            write_fake_run(tmp_path, f"r{i}", fake_params(rdbms=rdbms, sites=sites, delay_ms=delay),
                           n=6, seed=i)
    text = render([tmp_path], tmp_path / "r.html").read_text()
    captions = re.findall(r"<figcaption>([^<]*)</figcaption>", text)
    assert [c.split(": ", 1)[1] for c in captions] == [
        "mean completion time by sites (0 ms)", "CDF of completion time by sites (0 ms)",
        "mean completion time by delay (9 sites)", "CDF of completion time by delay (9 sites)"]


def test_runs_without_iterations_render_their_sections_only(tmp_path: Path) -> None:
    """A workload that stores no iterations (e.g. scheduler-db's reads.parquet) still gets
    its report, from its own section; nothing is written into its run directory."""
    import json

    run = tmp_path / "sdb-run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"params": {"workload": "scheduler-db", "nodes": 1000},
                                                   "host": {"hostname": "h"}}))
    before = sorted(p.name for p in run.iterdir())
    text = render([tmp_path], tmp_path / "r.html",
                  sections=[lambda p: "<h2>Scheduler DB</h2><p>t(N)</p>"]).read_text()
    assert "<h2>Scheduler DB</h2>" in text and "1 runs" in text
    assert sorted(p.name for p in run.iterdir()) == before
    with pytest.raises(UserError, match="no iteration"):
        render([tmp_path], tmp_path / "r2.html")


def test_intervals_and_differences_come_in_tables_of_their_own(tmp_path: Path) -> None:
    """Each scenario: the describe table as before, then every mean and percentile with its
    95 % CI, then differences between configurations side by side, real or within noise."""
    for i, (rdbms, delay, scale) in enumerate([("mariadb", 0.0, 0.05), ("mariadb", 50.0, 0.05),
                                                ("galera", 0.0, 0.05), ("galera", 50.0, 0.5)]):
        write_fake_run(tmp_path, f"r{i}", fake_params(rdbms=rdbms, delay_ms=delay), n=40, seed=i,
                       scale=scale)
    text = render([tmp_path], tmp_path / "r.html").read_text()
    per_op = text.index("<h3>Per operation")
    unc = text.index("<h3>Uncertainty: mean and percentiles with 95% CI per group")
    diff = text.index("<h3>Differences of mean totals")
    assert per_op < unc < diff
    head = re.search(r"<table class=\"data\"><thead><tr>(.*?)</tr>", text[unc:]).group(1)  # type: ignore[union-attr]
    assert "<th>mean [95% CI]</th>" in head and "<th>p99 [95% CI]</th>" in head and "<th>method</th>" in head
    assert "bootstrap over iterations" in text and "percentile bootstrap" in text
    rows = re.findall(r"<tr>(.*?)</tr>", text[diff:].split("</table>")[0])
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows[1:]]
    got = {(c[0], c[1]): c[-1] for c in cells}
    assert got[("galera − mariadb", "50 ms")] == "real"  # ten times slower
    assert got[("50 ms − 0 ms", "galera")] == "real"
    assert set(got.values()) <= {"real", "within noise"}


def test_the_sla_table_opens_its_studys_section(tmp_path: Path) -> None:
    """Runs judged by ``sla:`` (juice.sla.store) show their pass/fail table first in THEIR
    study's section, under its heading; a study with no judged run has none."""
    import shutil

    from juice.sla.criteria import IterationSla
    from juice.sla.store import record

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "results-0.1"
    root = tmp_path / "res"
    shutil.copytree(fixtures / "quickstart", root / "quickstart")
    shutil.copytree(fixtures / "sdb-fixture", root / "sdb-fixture")
    ks_runs = [d for d in (root / "quickstart").iterdir() if (d / "iterations.jsonl").exists()]
    assert ks_runs
    for d in ks_runs:  # a limit no run meets: every verdict fails
        record(d, IterationSla.model_validate({"max_avg_duration": 1e-9}))
    text = render([root / "quickstart", root / "sdb-fixture"], tmp_path / "r.html").read_text()
    # the Keystone section (its content has no heading of its own: the table brings one) comes
    # first, the scheduler-db section (no judged run: no table) after it
    sla_at = [m.start() for m in re.finditer(r"<h[23]>SLA</h[23]>", text)]
    sdb_at = text.index("<h2>Scheduler")
    ks_at = text.index("%reads / %writes")
    assert len(sla_at) == 1 and sla_at[0] < ks_at < sdb_at
    assert not re.search(r"<h[23]>SLA</h[23]>", text[sdb_at:])
    assert f"{len(ks_runs)} runs judged" in text and "<b>FAIL</b>" in text


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_figure_html_closes_the_figure_it_embeds(fmt: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    assert fig.number in plt.get_fignums()
    html = figure_html(fig, "a caption", fmt=fmt)
    assert html.startswith("<figure>") and "a caption" in html
    assert fig.number not in plt.get_fignums()  # pyplot no longer holds it
