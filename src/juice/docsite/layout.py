"""The code-layout page: every package and module of ``src/juice`` and of the plugins, each with
the first paragraph of its own docstring, and the clone's other directories with the header
comment of each script and example (read, never imported: a module's docstring is its entry)."""

from __future__ import annotations

from pathlib import Path

from juice.docsite.markdown import cell, code, first_paragraph, header, table
from juice.docsite.source import docstring

SRC = Path(__file__).resolve().parents[1]      # src/juice
CLONE = SRC.parents[1]
PLUGINS = ("plugins/juice-nova/src/juice_nova", "plugins/juice-messaging/src/juice_messaging")
OTHER = {
    "native": "native helpers in Go: the userspace WAN delayer (`native/wan-delay`), the module "
              "that pins Jaeger (`native/jaeger`); `native/build.sh` builds them",
    "benchmarks": "performance measurements and their last figures (`benchmarks/*.md`; "
                  "`benchmarks/README.md` gives the commands)",
    "tests": "unit tests and real-server integration tests, mirroring `src/juice/`; "
             "`tests/fixtures`: results of juice 0.1",
    "schemas": "the specs' JSON Schemas (`juice schema --dir schemas`; a test fails when they drift)",
    "docs": "this site's hand-written pages (`mkdocs.yml` at the clone's root)",
}


def _doc(path: Path) -> str:
    import inspect

    doc = docstring(path)
    return first_paragraph(inspect.cleandoc(doc)) if doc else ""


def _comment(path: Path) -> str:
    """The header comment of a script or a YAML file (modeline and shebang left out)."""
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("#!") or "yaml-language-server" in line:
            continue
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text:
            break
        lines.append(text)
    return " ".join(lines)


def package_rows(root: Path, base: Path) -> list[list[str]]:
    """A row per package and module under ``root`` (a package directory), packages first at
    each level, names relative to ``base``."""
    rows: list[list[str]] = []
    init = root / "__init__.py"
    rows.append([code(f"{root.relative_to(base)}/"), cell(_doc(init) if init.exists() else "")])
    for mod in sorted(p for p in root.glob("*.py") if p.name != "__init__.py"):
        rows.append([code(str(mod.relative_to(base))), cell(_doc(mod))])
    for sub in sorted(d for d in root.iterdir() if (d / "__init__.py").is_file()):
        rows += package_rows(sub, base)
    return rows


def page() -> str:
    """The code-layout page (Markdown)."""
    intro = (
        "Layers, top to bottom: `juice.cli` → `juice.studies.<name>` → `report` (every section "
        "drawn from what the instruments recorded) → shared instruments (`runner`, `profile`, "
        "`faults`, `trace`, `sla`, `compare`) → `services` + `openstack` (API clients shared by "
        "studies) → `lab` + `remote` + `load` + `results` → `util` + `onhost` (the programs run "
        "at a place, sent as their own source). The study contract (`juice.contract`) sits below "
        "the runner; nothing low imports a study, and studies never import each other. Modules "
        "stay under about 600 lines. Each row below is the first paragraph of the module's own "
        "docstring: a module without one shows `—`.")
    parts = [header("Code layout", "layout.py", intro)]
    parts.append("## src/juice\n")
    parts.append(table(["package / module", "what"], package_rows(SRC, SRC.parent)))
    parts.append("## Plugins (installed in the OpenStack and messaging venvs)\n")
    rows = [r for p in PLUGINS if (CLONE / p).is_dir() for r in package_rows(CLONE / p, CLONE)]
    parts.append(table(["package / module", "what"], rows))
    parts.append("## Scripts\n")
    parts.append(table(["script", "what"], [[code(f"scripts/{p.name}"), cell(_comment(p))]
                                            for p in sorted((CLONE / "scripts").glob("*.sh"))]))
    parts.append("## Examples (`juice plan` / `juice run` take each as it is)\n")
    parts.append(table(["spec", "what"], [[code(f"examples/{p.name}"), cell(_comment(p))]
                                          for p in sorted((CLONE / "examples").glob("*.yaml"))]))
    parts.append("## The other directories\n")
    parts.append(table(["directory", "what"], [[code(f"{k}/"), cell(v)] for k, v in OTHER.items()
                                               if (CLONE / k).is_dir()]))
    return "\n".join(parts)
