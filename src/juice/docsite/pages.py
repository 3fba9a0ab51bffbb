"""The generated pages by path (relative to the docs directory) and the site's build.

    pages()                      # {"reference/cli.md": "...", ...}
    build(Path("site"))          # mkdocs build, warnings as errors; the site's directory
"""

from __future__ import annotations

import contextlib
from pathlib import Path

CLONE = Path(__file__).resolve().parents[3]
CONFIG = CLONE / "mkdocs.yml"


def pages() -> dict[str, str]:
    """Every generated page: path under ``docs/`` -> Markdown."""
    from juice.docsite import cli, layout, report, results, spec

    out = {"reference/cli.md": cli.page(), "reference/results.md": results.page(),
           "reference/report.md": report.page(), "reference/layout.md": layout.page()}
    out.update(spec.pages())
    return out


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
