"""The generated pages by path (relative to the docs directory); the build is in
``juice.cli.docs`` (build_site).

    pages()                      # {"reference/cli.md": "...", ...}
"""

from __future__ import annotations


def pages() -> dict[str, str]:
    """Every generated page: path under ``docs/`` -> Markdown."""
    from juice.docsite import cli, layout, report, results, spec

    out = {"reference/cli.md": cli.page(), "reference/results.md": results.page(),
           "reference/report.md": report.page(), "reference/layout.md": layout.page()}
    out.update(spec.pages())
    return out
