"""``juice export FORMAT PATH... --out FILE``: stored results in the formats other tools read.

``juice export openmetrics``: per-run summaries (iterations, failures, each sample's mean and
p95, counts) and per-process CPU/RSS peaks of the runs' resource profiles, as OpenMetrics
text (``--format prometheus``: the Prometheus text format 0.0.4), ``juice.report.openmetrics``.
A group of its own rather than an option of ``analyze``: an export reads every run as stored
and judges nothing, and other formats can join it without growing ``analyze``'s options.
"""

from __future__ import annotations

from pathlib import Path

import typer

from juice.errors import UserError

export_app = typer.Typer(help="Export stored results in the formats other tools read "
                         "(OpenMetrics/Prometheus).", no_args_is_help=True)

PATHS = typer.Argument(..., help="Results directories, run directories or Rally JSON files.",
                       show_default=False)


@export_app.command("openmetrics")
def openmetrics(paths: list[Path] = PATHS,
                out: Path | None = typer.Option(None, "--out", "-o", help="Write to FILE "
                                                "(atomically: a textfile collector never reads "
                                                "half a file) instead of printing."),
                fmt: str = typer.Option("openmetrics", "--format", help="openmetrics (OpenMetrics "
                                        "1.0, ends with # EOF) or prometheus (text format 0.0.4, "
                                        "for node_exporter's textfile collector)."),
                timestamps: bool = typer.Option(False, "--timestamps", help="Stamp every sample "
                                                "with its run's start, for a backfill (promtool "
                                                "tsdb create-blocks-from openmetrics); runs "
                                                "without a start time are left out."),
                serve: str | None = typer.Option(None, "--serve", metavar="[HOST:]PORT",
                                                 help="Serve /metrics on a loopback address "
                                                 "until Ctrl-C, re-read from the results at each "
                                                 "scrape (at most every 5 s): a sweep in progress "
                                                 "shows up run by run.")) -> None:
    """Write per-run summaries and resource-profile peaks as OpenMetrics / Prometheus text.

    juice export openmetrics results/quickstart --out juice.prom
    juice export openmetrics results/nova --format prometheus \\
        --out /var/lib/node_exporter/textfile/juice.prom
    juice export openmetrics results/nightly --timestamps --out nightly.om   # promtool backfill
    juice export openmetrics results/nova --serve 9464   # a Prometheus scrapes 127.0.0.1:9464
    """
    from juice.report.openmetrics import FORMATS, export
    from juice.util.atomic import write_text

    if fmt not in FORMATS:
        raise UserError(f"--format: {fmt!r} (choose one of {', '.join(FORMATS)})")
    if serve is not None:
        if out is not None or timestamps:
            raise UserError("--serve: not with --out or --timestamps (a scrape stamps samples itself)")
        _serve(paths, fmt, serve)
        return
    text, runs = export(paths, fmt, timestamps)
    if out is None:
        typer.echo(text, nl=False)
        return
    write_text(out, text)
    typer.echo(f"{runs} runs: {out}")


def _serve(paths: list[Path], fmt: str, address: str) -> None:
    """Serve the export on ``address`` until Ctrl-C (``juice.report.omserve``)."""
    from juice.report.omserve import Renderer, parse_address, server

    host, port = parse_address(address)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UserError(f"{missing[0]}: not found (give a results directory, a run directory or a "
                        "Rally JSON file)")
    httpd = server(Renderer(paths, fmt), host, port)
    typer.echo(f"serving http://{host}:{httpd.server_address[1]}/metrics (Ctrl-C to stop)", err=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
