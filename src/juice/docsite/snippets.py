"""The YAML snippets of the docs and which of them are full specs.

Every ```` ```yaml ```` block of ``docs/*.md`` (and ``README.md``) is a full spec that
``juice plan`` accepts, unless one of its leading comment lines starts with ``# fragment`` (a section
of a spec, a lab spec, a host list...): then it is shown, not planned. The test suite plans
every full spec (``tests/test_docsite.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>[ \t]*)```ya?ml[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
FRAGMENT = "# fragment"


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    text: str

    @property
    def fragment(self) -> bool:
        """Whether a leading comment line says ``# fragment``: shown, not planned."""
        for line in self.text.lstrip().splitlines():
            if not line.startswith("#"):
                return False
            if line.startswith(FRAGMENT):
                return True
        return False

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def snippets(paths: list[Path]) -> list[Snippet]:
    """Every YAML block of the Markdown files ``paths``, its indentation removed."""
    out = []
    for path in paths:
        text = path.read_text()
        for m in FENCE.finditer(text):
            indent = len(m.group("indent"))
            body = "".join(line[indent:] if line[:indent].strip() == "" else line
                           for line in m.group("body").splitlines(keepends=True))
            out.append(Snippet(path, text.count("\n", 0, m.start()) + 1, body))
    return out


def markdown_files(clone: Path) -> list[Path]:
    """The docs' Markdown files and the README."""
    return [*sorted((clone / "docs").rglob("*.md")), clone / "README.md"]
