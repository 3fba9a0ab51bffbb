"""Markdown helpers shared by the generated pages: table cells, tables, a page's header."""

from __future__ import annotations

from collections.abc import Sequence

GENERATED = ("!!! note \"Generated\"\n    This page is generated from the code at every build "
             "(`juice docs build`, `src/juice/docsite/{module}`); edit the code, not this page.\n")


def cell(text: object) -> str:
    """``text`` as one table cell: one line, pipes escaped."""
    s = " ".join(str(text).split())
    return s.replace("|", "&#124;") if s else "—"


def code(text: object) -> str:
    """``text`` as inline code inside a table cell (backticks and pipes made safe)."""
    s = " ".join(str(text).split())
    if not s:
        return "—"
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}".replace("|", "&#124;")


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (cells already made with :func:`cell` or :func:`code`)."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def header(title: str, module: str, intro: str = "", toc: bool = False) -> str:
    """A generated page's title, the note that it is generated, and its introduction; without
    ``toc`` the page hides its table of contents (the width goes to the tables)."""
    parts = ([] if toc else ["---\nhide: [toc]\n---\n"]) + [f"# {title}\n", GENERATED.format(module=module)]
    if intro:
        parts.append(intro.strip() + "\n")
    return "\n".join(parts) + "\n"


def first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line ('' when there is none)."""
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())
