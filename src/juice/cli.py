"""The ``juice`` command. Subcommands live in ``cli_*`` modules, one group each."""

from __future__ import annotations

import signal
import sys
from types import FrameType

import click
import typer
from rich.markup import escape

from juice import __version__
from juice.cli_common import err, progress
from juice.errors import JuiceError

app = typer.Typer(
    name="juice",
    help="Measure the OpenStack control plane at scale and at the edge: real components, "
         "an emulated WAN between sites, Rally-compatible workloads.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"juice {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Juice: a laboratory for the OpenStack control plane."""
    _sweep_leftovers()


def _sweep_leftovers() -> None:
    """Every command first removes what crashed or killed runs left (namespaces, servers,
    delayers, work dirs): see ``juice.lab.state``. Labs made by `juice lab up` are kept."""
    import os

    from juice.lab import state
    from juice.lab.local import sweep

    if os.geteuid() != 0 or not state.labs_dir().is_dir():
        return
    with state.locked():
        for name in sweep():
            err.print(f"[dim]·[/dim] removed leftovers of lab {name!r} (its owner had died)")


@app.command()
def quickstart(
    results: str = typer.Option("results", help="Directory that receives the run."),
    sites: int = typer.Option(3, help="Number of sites."),
    delay: float = typer.Option(50.0, help="Uniform ONE-WAY delay between sites, ms."),
) -> None:
    """The first experiment: 3 sites 50 ms apart, WAN checked, MariaDB read from every site.

    Prints the path of the Markdown report. Removes every namespace and server it made.
    """
    from pathlib import Path

    from juice import quickstart as qs
    from juice.lab.local import require_root

    require_root()
    report = qs.run(Path(results), sites=sites, delay_ms=delay,
                    progress=progress)
    typer.echo(f"report: {report.resolve()}")


def _register() -> None:
    from juice import cli_analyze, cli_db, cli_keystone, cli_lab, cli_run

    app.command(name="run")(cli_run.run)
    app.command(name="plan")(cli_run.plan)
    cli_analyze.register(app)

    app.add_typer(cli_lab.lab_app, name="lab")
    app.add_typer(cli_db.db_app, name="db")
    app.add_typer(cli_keystone.keystone_app, name="keystone")


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM/SIGHUP into the same clean unwinding as Ctrl-C: every `finally` and
    # context manager runs, so whatever this command created is removed.
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: one line per expected error, exit 2 for bad input, 130 for Ctrl-C."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if inherited as ignored
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGHUP, _on_sigterm)
    _register()
    try:
        # Without standalone mode, click returns (not raises) the code of typer.Exit and
        # of Ctrl-C (130): pass it on as the process exit code.
        rc = app(standalone_mode=False, prog_name="juice")
        if rc == 130:
            err.print("[yellow]interrupted[/yellow]: cleaned up what this command created")
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except JuiceError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: cleaned up what this command created")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:  # click usage errors and aborts
        if isinstance(e, click.exceptions.UsageError):
            _suggest(e)
            where = e.ctx.command_path if e.ctx is not None else "juice"
            err.print(f"[red]error:[/red] {escape(e.format_message())} (see `{where} --help`)",
                      soft_wrap=True)
            sys.exit(2)
        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Abort):
            sys.exit(130)
        raise


def _suggest(e: click.exceptions.UsageError) -> None:
    """Add "did you mean" to an unknown-command error."""
    import difflib

    prefix = "No such command '"
    if not e.message.startswith(prefix) or e.ctx is None:
        return
    typed = e.message[len(prefix):].rstrip(".'")
    group = e.ctx.command
    if isinstance(group, click.Group):
        close = difflib.get_close_matches(typed, group.list_commands(e.ctx), n=1)
        if close:
            e.message += f" Did you mean '{close[0]}'?"


if __name__ == "__main__":
    main()
