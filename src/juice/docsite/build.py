"""The site's build: ``mkdocs.yml`` (``docs/`` plus the generated pages, which the hook
``juice.docsite.hooks`` adds) into a directory, warnings as errors.

    build(Path("site"))          # the site's directory

Apart from the pages (``juice.docsite.pages``) so that ``juice docs`` (juice.cli.docs) runs a build
without importing what the pages read (the CLI itself among them).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

CLONE = Path(__file__).resolve().parents[3]
CONFIG = CLONE / "mkdocs.yml"


def build(out: Path, strict: bool = True, config: Path = CONFIG) -> Path:
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
