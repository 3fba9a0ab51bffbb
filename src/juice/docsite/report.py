"""The report reference: every section a report can hold, found where the code renders its
heading (``<h2>``/``<h3>`` in the source of the report's modules), with the order the study frame
puts them in (``juice.report.shared``: ``BEFORE``, the study's own sections, ``AFTER``)."""

from __future__ import annotations

import ast
import html
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from juice.docsite.markdown import cell, first_paragraph, header, table
from juice.docsite.source import module_name
from juice.docsite.source import tree as parsed

SRC = Path(__file__).resolve().parents[1]      # src/juice
HEADING = re.compile(r"<(h[234])\b[^>]*>(.*?)</\1>", re.S)
TAG = re.compile(r"<[^>]+>")
# The frame's own modules (every study's report may hold their sections).
FRAME = ("report/shared.py", "report/sla.py", "report/deviations.py", "report/seeds.py",
         "report/findings.py", "report/faults.py", "report/profiles.py", "report/traces.py",
         "report/errors.py")
PAGES = ("report/pages.py",)
HEAD = ["level", "heading", "where"]   # the pages of juice compare --html and juice trend --html


@dataclass(frozen=True)
class Heading:
    level: str
    text: str
    module: str
    line: int


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{…}"
                       for v in node.values)
    return ""


def headings(path: Path) -> list[Heading]:
    """Every heading rendered in the module at ``path``, in source order."""
    if not re.search(r"<h[234]\b", path.read_text()):
        return []
    tree = parsed(path)
    module = module_name(path)
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings, comments
    out: dict[tuple[str, str], Heading] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.JoinedStr | ast.Constant) and id(node) not in docs
                and not _inside_fstring(node, tree)):
            for m in HEADING.finditer(_text(node)):
                text = html.unescape(TAG.sub("", m.group(2))).strip()
                key = (m.group(1), text)
                if text and (key not in out or out[key].line > node.lineno):
                    out[key] = Heading(m.group(1), text, module, node.lineno)
    return sorted(out.values(), key=lambda h: h.line)


def _inside_fstring(node: ast.AST, tree: ast.Module) -> bool:
    if not isinstance(node, ast.Constant):
        return False
    parents = getattr(tree, "_juice_fstring_parts", None)
    if parents is None:
        parents = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        tree._juice_fstring_parts = parents  # type: ignore[attr-defined]
    return id(node) in parents


def _rows(found: list[Heading]) -> list[list[str]]:
    return [[cell(h.level), cell(h.text), cell(f"`{h.module}`:{h.line}")] for h in found]


def _providers(names: str) -> str:
    from juice.report import shared

    provs = getattr(shared, names)
    return "\n".join(f"{i}. `{p.__name__}`: {first_paragraph(p.__doc__)}" for i, p in enumerate(provs, 1))


def page() -> str:
    """The report reference page (Markdown)."""
    from juice import studies
    from juice.report import shared

    intro = (
        "`juice run` ends with `report.html` in the study's results directory; `juice report "
        "PATH... -o FILE` re-makes it from stored results only. It is one self-contained HTML "
        "file (figures inline). A report of several studies opens with a one-screen *Summary* "
        "(each study's first findings and its seed verdict tally). Each study's part opens with "
        "its *Findings* (computed from the data) and *The seed beside Juice* (the seed's "
        "published values next to Juice's, with a verdict per row: [seeds](../seeds.md)).\n\n"
        + first_paragraph(shared.__doc__))
    parts = [header("Report sections", "report.py", intro)]
    parts.append("## The frame: what every study's report gets\n")
    parts.append("Before the study's own sections (under its heading):\n\n" + _providers("BEFORE") + "\n")
    parts.append("After them, in this order, each only when the runs hold something for it:\n\n"
                 + _providers("AFTER") + "\n")
    frame = [h for rel in FRAME for h in headings(SRC / rel)]
    parts.append("Headings these sections render (`{…}`: filled in from the runs):\n")
    parts.append(table(HEAD, _rows(frame)))
    for name in studies.names():
        study = studies.get(name)
        pkg = type(study).__module__.rsplit(".", 1)[0]
        root = Path(importlib.import_module(pkg).__file__ or "").parent
        found = [h for p in sorted(root.rglob("*.py")) for h in headings(p)]
        parts.append(f"## {name}: {study.title} {{#study-{name}}}\n")
        parts.append(f"The sections of `{pkg}` (study page: [{name}](../studies/{_page(name)}.md)).\n")
        parts.append(table(HEAD, _rows(found)) if found else "No headings of its own.\n")
    parts.append("## Comparison and trend pages\n")
    parts.append("`juice compare A B --html FILE` and `juice trend PATH --html FILE` "
                 "([comparing configurations](../guides/compare.md)):\n")
    parts.append(table(HEAD, _rows([h for rel in PAGES for h in headings(SRC / rel)])))
    return "\n".join(parts)


def _page(study: str) -> str:
    return {"scheduler-db": "schedulerdb"}.get(study, study)
