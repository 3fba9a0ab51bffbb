"""Reports re-made from stored results: one self-contained HTML file (see ``html.render``; the
report of every study's runs is ``juice.studies.report``).

Extra sections: ``render(paths, out, sections=[fn])`` with ``fn(paths) -> str | None``; build
fragments with ``figure_html(fig)`` and ``table_html(df)``.
"""

from juice.report.figures import figure_html
from juice.report.html import Section, register_section, render
from juice.report.tables import table_html

__all__ = ["Section", "figure_html", "register_section", "render", "table_html"]
