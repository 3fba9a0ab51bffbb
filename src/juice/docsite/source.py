"""The source files of ``src/juice``, parsed once per process (every generator reads them)."""

from __future__ import annotations

import ast
import tokenize
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]      # src/juice


@cache
def tree(path: Path) -> ast.Module:
    """The parsed module at ``path``."""
    return ast.parse(path.read_text(), str(path))


def docstring(path: Path) -> str | None:
    """The module docstring of ``path``, read from its first tokens (no full parse)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING}
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in skip:
                continue
            if tok.type == tokenize.STRING:
                value = ast.literal_eval(tok.string)
                return value if isinstance(value, str) else None
            return None
    return None


def module_name(path: Path) -> str:
    """``juice.x.y`` for ``src/juice/x/y.py`` (``juice.x`` for a package's ``__init__``)."""
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")


def path_of(module: str) -> Path | None:
    """The file of module ``juice.x.y`` under ``src/``, if there is one."""
    base = SRC.parent.joinpath(*module.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def constant(module: str, name: str, depth: int = 0) -> str | None:
    """The string a module-level ``name = "..."`` of ``module`` holds, following
    ``from juice.a import name`` (statically: nothing is imported)."""
    path = path_of(module)
    if path is None or depth > 4:
        return None
    for node in tree(path).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if (any(isinstance(t, ast.Name) and t.id == name for t in targets)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                return node.value.value
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return constant(node.module, alias.name, depth + 1)
    return None
