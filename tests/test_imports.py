"""No import cycle among juice modules.

Every module under ``src/juice`` is parsed with ``ast`` (nothing is imported) and EVERY
``import``/``from ... import`` of a juice module counts, wherever it stands: module level,
inside a function, under ``if TYPE_CHECKING:``. A lazy import only hides a cycle, it does not
break it. ``from juice.x import y`` is an edge to ``juice.x.y`` when that is a module, else
to ``juice.x``; relative imports are resolved against the importing package. An edge to a
package is an edge to its ``__init__``.

No edge is ignored: a package's ``__init__`` importing its own submodules is an ordinary edge
(it is a cycle only if one of those submodules imports the package back).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "juice"


def module_files() -> dict[str, Path]:
    """``{"juice.services.base": path, "juice.services": .../__init__.py, ...}``."""
    out: dict[str, Path] = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` itself when it is a juice module, else its longest juice-module prefix."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every juice module ``module`` imports, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                    target = _resolve(alias.name, modules)
                    if target:
                        yield target
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if not (origin == ROOT or origin.startswith(ROOT + ".")):
                continue
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                target = sub if sub in modules else _resolve(origin, modules)
                if target:
                    yield target


def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {m: {t for t in imports_of(m, p, modules) if t != m} for m, p in modules.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component of more than one module
    (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return [_one_cycle(g, set(c)) for c in comps]


def _one_cycle(g: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest cycle through the first module of ``comp`` (breadth-first, inside ``comp``)."""
    start = min(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g[v] & comp):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def test_the_graph_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    src = tmp_path / "src" / ROOT
    (src / "a").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "a" / "__init__.py").write_text("")
    (src / "a" / "x.py").write_text("from typing import TYPE_CHECKING\n"
                                    "if TYPE_CHECKING:\n    from juice.a.y import Y\n")
    (src / "a" / "y.py").write_text("def f():\n    from . import x\n    import juice.a\n")
    modules = {"juice": src / "__init__.py", "juice.a": src / "a" / "__init__.py",
               "juice.a.x": src / "a" / "x.py", "juice.a.y": src / "a" / "y.py"}
    g = {m: set(imports_of(m, p, modules)) for m, p in modules.items()}
    assert g["juice.a.x"] == {"juice.a.y"}
    assert g["juice.a.y"] == {"juice.a.x", "juice.a"}
    assert cycles(g) == [["juice.a.x", "juice.a.y", "juice.a.x"]]


def test_no_import_cycle_among_juice_modules() -> None:
    found = cycles(graph())
    for c in found:
        print("import cycle: " + " -> ".join(c))
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


# ---- layers ------------------------------------------------------------------------------
# Top to bottom (``LAYERS``): cli -> studies (the registry and each study) + the driver process
# -> the report (every section, the frame's shared ones included, drawn from what the
# instruments recorded) -> shared instruments (runner, profile, faults, trace) -> the study contract ->
# services + openstack + analysis -> lab + load + results + spec -> remote (the host agent and
# the ssh sessions to it; the lab's host place is ``juice.lab.hostplace``) -> util. A module
# may import its own layer and the layers below. ``import_module("juice....")`` with a
# constant counts.

STUDY = re.compile(r"^juice\.studies\.([a-z_]+)")
BELOW_STUDIES = ("juice.lab", "juice.hosts", "juice.load", "juice.results", "juice.util",
                 "juice.services", "juice.openstack", "juice.spec", "juice.sweep", "juice.trace",
                 "juice.report", "juice.analysis", "juice.contract", "juice.profile", "juice.faults",
                 "juice.sla", "juice.compare")
# what the lab and the hosts may use: nothing that runs services, studies or runs
NOT_FOR_LAB = ("juice.services", "juice.openstack", "juice.studies", "juice.sweep", "juice.trace",
               "juice.report", "juice.analysis", "juice.cli", "juice.load", "juice.contract",
               "juice.profile", "juice.faults", "juice.driver", "juice.sla", "juice.compare")


def string_imports(path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Juice modules named by ``importlib.import_module("juice....")`` with a constant."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
                == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and node.args[0].value.startswith(ROOT + ".")):
            target = _resolve(node.args[0].value, modules)
            if target:
                yield target


def all_edges() -> dict[str, set[str]]:
    modules = module_files()
    return {m: {t for t in [*imports_of(m, p, modules), *string_imports(p, modules)] if t != m}
            for m, p in modules.items()}


def _study(module: str) -> str | None:
    m = STUDY.match(module)
    return m.group(1) if m and m.group(1) != "base" else None


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_studies_never_import_each_other() -> None:
    bad = [(m, t) for m, ts in all_edges().items() for t in ts
           if _study(m) and _study(t) and _study(m) != _study(t)]
    assert not bad, bad


def test_nothing_below_the_studies_imports_a_study() -> None:
    bad = [(m, t) for m, ts in all_edges().items() for t in ts if _under(m, BELOW_STUDIES) and _study(t)]
    assert not bad, bad


def test_the_lab_and_the_hosts_import_nothing_above_them() -> None:
    bad = [(m, t) for m, ts in all_edges().items() for t in ts
           if _under(m, ("juice.lab", "juice.hosts")) and _under(t, NOT_FOR_LAB)]
    assert not bad, bad


def test_string_imports_are_seen(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text('import importlib\nx = importlib.import_module("juice.studies.keystone.catalog")\n')
    assert list(string_imports(f, module_files())) == ["juice.studies.keystone.catalog"]


# Every module's layer, bottom (0) to top; a module imports its own layer and those below.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the programs run at a place (juice.onhost) import nothing of Juice: anything may send them
    ("juice.util", "juice.errors", "juice.paths", "juice.onhost"),
    ("juice.hosts",),  # the host agent and the sessions to it: below the lab that uses them
    # the spec models of SLA criteria and the clock offsets a run carries are data every layer
    # above reads: they sit with the specs and results (a module named whole is on its own line)
    ("juice.lab", "juice.load", "juice.results", "juice.spec", "juice.sla.criteria",
     "juice.profile.clocks"),
    ("juice.services", "juice.openstack", "juice.analysis", "juice.sla", "juice.compare"),
    ("juice.contract",),  # the study contract: below everything that drives a study
    ("juice.sweep", "juice.profile", "juice.faults", "juice.trace"),
    ("juice.report",),  # the report's sections read the instruments' data, never the reverse
    ("juice.studies", "juice.driver"),
    # the `juice` command (a package, one module per verb group) and the documentation site that
    # describes it (its CLI reference walks the click app; `juice docs` builds it)
    ("juice.cli", "juice.docsite"),
)


def layer(module: str) -> int | None:
    """The layer of the longest name in ``LAYERS`` the module is (or is under)."""
    found = [(len(p), i) for i, names in enumerate(LAYERS) for p in names if _under(module, (p,))]
    return max(found)[1] if found else None


def test_every_module_has_a_layer() -> None:
    assert [m for m in module_files() if m != ROOT and layer(m) is None] == []


def test_no_import_runs_back_up_a_layer() -> None:
    bad = sorted(f"{m} -> {t}" for m, ts in all_edges().items() for t in ts
                 if t != ROOT and (layer(m) or 0) < (layer(t) or 0))
    assert not bad, bad


def test_the_registry_is_not_looked_up_from_below() -> None:
    # the report, the runner and the load engine get studies handed in (no string lookups)
    bad = [(m, t) for m, ts in all_edges().items() for t in ts
           if _under(m, BELOW_STUDIES) and t == "juice.studies"]
    assert not bad, bad
