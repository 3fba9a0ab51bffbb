"""The HTML report: ONE self-contained file (inline CSS, figures as inline SVG, no script, no
external fetch; no table or figure wider than the page: ``layout``), re-made from the stored
results alone, written atomically.

    from juice import studies
    studies.report([Path("results/keystone")], Path("report.html"))   # every study's sections
    render([Path("results/keystone")], Path("report.html"), studies=[STUDY])   # these studies'

Content: a provenance line (what was read, how to re-make the report), then the sections of
the ``studies`` given (``Study.report_sections``: each returns [] when the paths hold none of
its runs, and opens with its findings, ``findings``) inside the sections the frame adds to every
study from what its run directories hold (``shared``: SLA first; run order, fault timeline,
servers' errors, request traces, resource profile, and the server settings that differ from the
shipped defaults last), then extra sections; with several
sections holding findings, a one-screen summary of them comes first. Each study's sections
say what they show. The report never looks studies up itself: the registry
(``juice.studies.report``) hands them in.

A section every study should get is a provider of ``shared`` (``shared.register``); a
section of the whole report (not of a study) is added with ``render(..., sections=[fn])`` (or
``register_section(fn)``), ``fn(paths) -> str | None`` (``paths``: a list of the paths given)
returning an HTML fragment: make one with :func:`figure_html` and :func:`table_html`.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Protocol

from juice import __version__
from juice.contract import ReportInput
from juice.errors import UserError
from juice.report import findings, layout, seeds
from juice.report.figures import figure_html
from juice.report.tables import table_html
from juice.results import tidy
from juice.util import atomic

Section = Callable[[list[Path]], "str | None"]  # a function taking Sequence[Path] fits too


class StudySections(Protocol):
    """What the report asks of a study (``juice.contract.Study`` has it): which runs are its
    own (``key_of`` a run's manifest: None for another study's) and its sections."""

    def key_of(self, manifest: Mapping[str, object]) -> str | None: ...

    def report_sections(self, inputs: ReportInput) -> list[str]: ...


_REGISTERED: list[Section] = []

__all__ = ["Section", "figure_html", "register_section", "render", "render_html", "table_html"]


def register_section(fn: Section) -> Section:
    """Add ``fn`` to every report (``juice report`` included); usable as a decorator. Sections
    passed to :func:`render` come after the registered ones."""
    if fn not in _REGISTERED:
        _REGISTERED.append(fn)
    return fn

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;margin-top:2em}
h3{margin-top:1.4em}
table.data{border-collapse:collapse;margin:.5em 0 1em;font-size:12px}
table.data th,table.data td{border:1px solid #ddd;padding:2px 6px;text-align:left}
table.data th{background:#f3f3f3}table.data td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure img{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}
.note{color:#555;font-size:13px}details{margin:.5em 0}code{background:#f3f3f3;padding:0 3px}
"""


def _provenance_short(paths: Sequence[Path], found: tidy.Discovery, out: Path) -> str:
    cmd = f"juice report {' '.join(shlex.quote(str(p)) for p in paths)} -o {shlex.quote(str(out))}"
    skipped = f" {len(found.failed)} failed runs skipped." if found.failed else ""
    if found.warmup:  # juice.sweep.warmup: kept for inspection, never counted
        skipped += f" {len(found.warmup)} warm-up runs (<code>.warmup</code>) not counted."
    return (f"<p class=note>Generated {escape(dt.datetime.now().isoformat(timespec='seconds'))} by "
            f"juice {escape(__version__)} from {escape(', '.join(str(p) for p in paths))}: "
            f"{len(found.runs) + len(found.rally_files)} runs.{skipped} "
            f"Re-make it with <code>{escape(cmd)}</code>.</p>")


def render_html(paths: Sequence[Path], out_html: Path, sections: Sequence[Section] | None = None,
                filter_q: float | None = 0.95, params: Mapping[str, object] | None = None,
                title: str = "Juice report", studies: Sequence[StudySections] = ()) -> str:
    """The report's HTML text (see :func:`render`)."""
    found = tidy.discover(paths)
    if found.empty:
        raise tidy.no_run_error(paths, found)
    inputs = ReportInput(list(paths), out_html, filter_q, dict(params or {}))
    body = [f"<h1>{escape(title)}</h1>", _provenance_short(paths, found, out_html)]
    from juice.report import shared

    parts: list[str] = []
    for study in studies:  # the study's own sections inside the frame's shared ones
        parts += shared.around(study.report_sections(inputs), inputs,
                               owns=lambda m, s=study: s.key_of(m) is not None,  # type: ignore[misc]
                               level=str(getattr(study, "profile_level", "") or ""))
    for fn in [*_REGISTERED, *(sections or [])]:
        frag = fn(list(paths))
        if frag:
            parts.append(frag)
    parts = findings.with_summary(parts)  # several studies: their first findings, first
    if not parts:
        raise UserError(f"{', '.join(str(p) for p in paths)}: the runs hold no iteration (and no "
                        "report section knows them): nothing to report")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{escape(title)}</title><style>{CSS}{layout.CSS}{findings.CSS}{seeds.CSS}</style></head><body>"
            + "\n".join(body + parts) + "</body></html>\n")


def render(paths: Sequence[Path], out_html: Path, sections: Sequence[Section] | None = None,
           filter_q: float | None = 0.95, params: Mapping[str, object] | None = None,
           studies: Sequence[StudySections] = ()) -> Path:
    """Write the self-contained report of the runs under ``paths`` to ``out_html``
    (atomically) and return its path: the sections of ``studies``, then ``sections``.
    UserError when no complete run is found."""
    text = render_html(paths, out_html, sections, filter_q, params, studies=studies)
    atomic.write_text(out_html, text)
    return out_html
