"""The ``juice`` command's click app. Subcommands live in the modules beside this one, one group each."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType

import click
import typer
from rich.markup import escape

from juice import __version__
from juice.cli.common import err
from juice.errors import JuiceError, UserError

app = typer.Typer(
    name="juice",
    help="Measure the OpenStack control plane at scale and at the edge: real components, "
         "an emulated WAN between sites, Rally-compatible workloads.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion (docs/guides/exports.md)
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
    _other_clone()
    _sweep_leftovers()


def _other_clone() -> None:
    """One line on stderr when the current directory is inside a Juice clone whose code is not
    the code running (the venv's editable install points at another clone: the last one to
    run scripts/setup.sh)."""
    import os

    here = Path(__file__).resolve().parents[1]
    d = Path.cwd().resolve()
    for _ in range(40):
        mine = d / "src" / "juice"
        if (mine / "__init__.py").is_file() and (d / "pyproject.toml").is_file():
            if mine.resolve() != here and not os.environ.get("JUICE_OTHER_CLONE_OK"):
                err.print(f"[yellow]![/yellow] this clone's code ({mine}) is not the juice running "
                          f"({here}): run `bash scripts/setup.sh` here to use it")
            return
        if d.parent == d:
            return
        d = d.parent


def _sweep_leftovers() -> None:
    """Every command first removes what crashed or killed runs left (namespaces, servers,
    delayers, work dirs): see ``juice.lab.state``. Labs made by `juice lab up` are kept."""
    import os

    from juice.lab import state
    from juice.lab.local import sweep
    from juice.paths import sweep_private_tmp

    sweep_private_tmp()  # e.g. the driver dir of a killed run against an existing cloud
    if os.geteuid() != 0 or not state.labs_dir().is_dir():
        return
    with state.locked():
        for name in sweep():
            err.print(f"[dim]·[/dim] removed leftovers of lab {name!r} (its owner had died)")


@app.command()
def quickstart(
    results: Path | None = typer.Option(None, help="Results directory (default results/quickstart)."),
) -> None:
    """The main job: `juice run examples/quickstart.yaml` (Keystone on MariaDB vs Galera,
    3 sites, 0 and 50 ms one-way; a few minutes). Prints the report's path at the end.
    """
    from juice.cli import run as cli_run

    spec = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
    if not spec.is_file():
        raise UserError(f"{spec}: not found; run from a Juice clone: juice run examples/quickstart.yaml")
    cli_run.run(spec, results=results, report=True)


def _register() -> None:
    """Add the command groups to ``app`` (once, however often ``main`` runs in a process)."""
    from juice.cli import (
        analyze,
        calibrate,
        compare,
        db,
        docs,
        export,
        hosts,
        keystone,
        lab,
        run,
        schema,
        sla,
        trace,
        trend,
    )

    if any(c.name == "run" for c in app.registered_commands):
        return

    app.command(name="run")(run.run)
    app.command(name="plan")(run.plan)
    app.command(name="cleanup")(run.cleanup)
    analyze.register(app)
    trace.register(app)
    sla.register(app)
    compare.register(app)
    trend.register(app)
    calibrate.register(app)
    schema.register(app)

    app.add_typer(lab.lab_app, name="lab")
    app.add_typer(db.db_app, name="db")
    app.add_typer(keystone.keystone_app, name="keystone")
    app.add_typer(hosts.hosts_app, name="hosts")
    app.add_typer(export.export_app, name="export")
    docs.register(app)


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
