"""``juice docs build [--out DIR]``: the documentation site (MkDocs, ``mkdocs.yml`` at the
clone's root): ``docs/`` plus the references generated from the code (``juice.docsite``),
built with warnings as errors. ``juice docs serve`` serves it with live reload. The build
(``build_site``) is here, not in ``juice.docsite``, which reads the CLI: the command imports
nothing of the pages, MkDocs loads them through the hook in ``mkdocs.yml``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from juice.errors import UserError

CLONE = Path(__file__).resolve().parents[3]
CONFIG = CLONE / "mkdocs.yml"

docs_app = typer.Typer(help="The documentation site: build it (warnings are errors) or serve it.",
                       no_args_is_help=True)

OUT = typer.Option(None, "--out", "-o", show_default=False,
                   help="Where the site goes (HTML); default: build/site in the clone (git ignores build/).")
STRICT = typer.Option(True, "--strict/--no-strict",
                      help="Fail on any warning: a broken link or anchor, a page outside the navigation.")


def _mkdocs() -> None:
    try:
        import mkdocs  # noqa: F401
    except ImportError as e:
        raise UserError("mkdocs is not installed in this venv: run `bash scripts/setup.sh` "
                        "(it installs scripts/lock/juice.txt)") from e


@docs_app.command("build")
def build(out: Path | None = OUT, strict: bool = STRICT) -> None:
    """Build the documentation site into DIR; open DIR/index.html.

    juice docs build --out /tmp/site
    """
    _mkdocs()
    from mkdocs.exceptions import MkDocsException

    if not CONFIG.is_file():
        raise UserError(f"{CONFIG}: not found; run from a Juice clone")
    site = out if out is not None else CONFIG.parent / "build" / "site"
    try:
        build_site(site, strict=strict)
    except MkDocsException as e:
        raise UserError(f"the site did not build: {e} (the warnings above say where)") from e
    typer.echo(f"site: {site.resolve() / 'index.html'}")


@docs_app.command("serve")
def serve(addr: str = typer.Option("127.0.0.1:8000", help="Address to serve on.")) -> None:
    """Serve the site with live reload while you edit docs/ (Ctrl-C stops)."""
    _mkdocs()
    from mkdocs.commands import serve as mk_serve

    with contextlib.chdir(CONFIG.parent):  # the included files' paths are the clone's
        mk_serve.serve(str(CONFIG), dev_addr=addr, livereload=True)


def build_site(out: Path, strict: bool = True, config: Path = CONFIG) -> Path:
    """Build the site from ``config`` (the clone's ``mkdocs.yml``: ``docs/`` plus the generated
    pages, added by ``juice.docsite.hooks``) into ``out``; with ``strict`` every warning (a
    broken link or anchor, a page missing from the navigation...) fails the build
    (``mkdocs.exceptions.Abort``)."""
    import logging

    from mkdocs.commands import build as mk_build
    from mkdocs.config import load_config

    log = logging.getLogger("mkdocs")
    log.setLevel(logging.WARNING)
    if not log.handlers:  # mkdocs' own CLI adds one; in-process builds say where, too
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s - %(message)s"))
        log.addHandler(handler)
    site = out.resolve()
    with contextlib.chdir(config.parent):  # the included files' paths are the clone's
        cfg = load_config(str(config), site_dir=str(site), strict=strict)
        mk_build.build(cfg)
    return out


def register(app: typer.Typer) -> None:
    app.add_typer(docs_app, name="docs")
