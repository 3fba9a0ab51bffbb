"""``juice docs build [--out DIR]``: the documentation site (MkDocs, ``mkdocs.yml`` at the
clone's root): ``docs/`` plus the references generated from the code (``juice.docsite``),
built with warnings as errors. ``juice docs serve`` serves it with live reload."""

from __future__ import annotations

from pathlib import Path

import typer

from juice.errors import UserError

docs_app = typer.Typer(help="The documentation site: build it (warnings are errors) or serve it.",
                       no_args_is_help=True)


@docs_app.command("build")
def build(out: Path = typer.Option(Path("site"), "--out", "-o", help="Where the site goes (HTML)."),
          strict: bool = typer.Option(True, "--strict/--no-strict",
                                      help="Fail on any warning: a broken link or anchor, a page "
                                           "outside the navigation.")) -> None:
    """Build the documentation site into DIR; open DIR/index.html.

    juice docs build --out /tmp/site
    """
    from mkdocs.exceptions import MkDocsException

    from juice.docsite.pages import CONFIG
    from juice.docsite.pages import build as do_build

    if not CONFIG.is_file():
        raise UserError(f"{CONFIG}: not found; run from a Juice clone")
    try:
        do_build(out, strict=strict)
    except MkDocsException as e:
        raise UserError(f"the site did not build: {e} (the warnings above say where)") from e
    typer.echo(f"site: {out.resolve() / 'index.html'}")


@docs_app.command("serve")
def serve(addr: str = typer.Option("127.0.0.1:8000", help="Address to serve on.")) -> None:
    """Serve the site with live reload while you edit docs/ (Ctrl-C stops)."""
    from mkdocs.commands import serve as mk_serve

    from juice.docsite.pages import CONFIG

    mk_serve.serve(str(CONFIG), dev_addr=addr, livereload=True)


def register(app: typer.Typer) -> None:
    app.add_typer(docs_app, name="docs")
