"""The results reference: every file a run directory holds, found where the code writes it
(``rd.file(NAME)``, ``rd.write_json(NAME, ...)``, ``rd.write_text(NAME, ...)`` on a run's
``RunDir``, anywhere under ``src/juice``), with the module that writes it, and its columns or
keys where the code declares them (a constant the readers use too) or, else, as they are
stored in the runs committed under ``tests/fixtures``."""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from juice.docsite.markdown import cell, code, header, table
from juice.docsite.source import constant, docstring, module_name, path_of, tree

SRC = Path(__file__).resolve().parents[1]          # src/juice
CLONE = SRC.parents[1]
FIXTURES = CLONE / "tests" / "fixtures"
WRITERS = ("file", "write_json", "write_text")
# A module that may write into a run names one this way (only those are parsed).
RUNDIR_TEXT = re.compile(r"\brd\s*(\.(file|write_json|write_text)\(|/)|self\.partial|def manifest")
# Written by the frame beside the studies' own files, through a constant the readers share.
ALSO = {"juice.results.tidy": "TABLE_NAME", "juice.profile.table": "PROFILE_TABLE"}
# Columns (or keys) declared in code: "module:CONSTANT" (read live) and what else there is.
DECLARED = {
    "actions.parquet": ("juice.results.tidy_table:MEASURES", "plus one column per run parameter"),
    "profile.parquet": ("juice.profile.frames:COLUMNS", "metric names: `juice.profile.sampler.METRICS`"),
    "rabbitmq.parquet": ("juice.services.buses.mqstats:COLUMNS", ""),
    "events.jsonl": ("juice.faults.runner:FaultEvent", "one JSON object per applied fault"),
}
WHAT = {
    "manifest.json": "what was asked (the spec), the run's parameters (`params`), versions, host "
                     "facts, WAN backend and check, SLA verdict, order, profile and fault summaries",
    "error.txt": "why a run failed (only in `<run>.failed`)",
    "iterations.jsonl": "one record per iteration: timestamp, duration, error, atomic actions "
                        "(children included), site; open loop: intended start, dispatch lag, latency",
    "rally.json": "Rally task format 1.2 (`rally task import` reads it), SLA in Rally's form",
    "actions.parquet": "the tidy table: one row per atomic action per iteration, failed ones included",
    "profile.parquet": "the resource profile: CPU, RSS, threads, fds per process; bytes and "
                       "packets per site; DB counters (cumulative counters, rates derived when read)",
    "events.jsonl": "the faults applied, with their exact start and end",
    "server-errors.json": "the servers' WARNING/ERROR lines by message template",
    "logs": "what each server's log gained during the run (a directory)",
    "summary.json": "the run's own summary (percentiles, counts, rates)",
    "boots.parquet": "one row per boot: Rally's polled time, nova's own time, API time, host, fault",
    "boots-{…}.jsonl": "the boots' raw records per driver site (the source of boots.parquet)",
    "messages.parquet": "one row per message: intended/actual send, reply, deliveries, duplicates, locality",
    "deliveries.parquet": "one row per delivery of a message to a server",
    "processes.json": "the agents' processes: agents per process, RSS, CPU",
    "counters.json": "the bus's own counters before, mid-run and after",
    "reads.parquet": "one row per timed read of the compute nodes' state",
    "updates.json": "the updaters' target and achieved rate",
    "osprofiler.json": "OSProfiler's traces of the run's boots",
    "haproxy-stats.json": "haproxy's per-frontend/backend counters (its stats socket)",
    "placement.json": "placement's state after the run (providers, allocations)",
    "agents": "the agents' work files (a directory)",
    "bus-logs": "the bus servers' logs (a directory)",
}


@dataclass
class ResultFile:
    name: str
    writers: set[str] = field(default_factory=set)


def _modules() -> Iterator[tuple[str, ast.Module]]:
    """The modules that may write into a run (their text names a writer), parsed."""
    for path in sorted(SRC.rglob("*.py")):
        name = module_name(path)
        text = path.read_text()
        if not name.startswith("juice.docsite") and RUNDIR_TEXT.search(text):
            yield name, tree(path)


def _name_of(module: str, node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)
    if isinstance(node, ast.Name):
        return constant(module, node.id)
    return None


def _is_rundir(module: str, node: ast.expr) -> bool:
    text = ast.unparse(node)
    return (text == "rd" or text.endswith(".rd")
            or (module == "juice.results.store" and text in ("self", "self.partial")))


def scan() -> dict[str, ResultFile]:
    """File name (top-level entry of a run directory) -> the modules that write it."""
    found: dict[str, ResultFile] = {}
    for module, parsed in _modules():
        for node in ast.walk(parsed):
            arg: ast.expr | None = None
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WRITERS and _is_rundir(module, node.func.value) and node.args):
                arg = node.args[0]
            elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                  and _is_rundir(module, node.left)):
                arg = node.right
            name = _name_of(module, arg) if arg is not None else None
            if name and (("/" not in name and "." in name) or name in ("logs", "agents", "bus-logs")):
                found.setdefault(name, ResultFile(name)).writers.add(module)
    for module, const in ALSO.items():
        also = constant(module, const)
        if also is None:
            raise LookupError(f"{module}.{const}: not a string constant any more (docsite.results.ALSO)")
        found.setdefault(also, ResultFile(also)).writers.add(f"{module} ({const})")
    return found


def _declared(name: str) -> str:
    ref, more = DECLARED[name]
    module, attr = ref.split(":")
    obj = getattr(importlib.import_module(module), attr)
    fields = getattr(obj, "__dataclass_fields__", None)
    cols = list(fields) if fields else list(obj)
    return ", ".join(f"`{c}`" for c in cols) + (f"; {more}" if more else "") + f" (`{ref}`)"


@cache
def _fixtures() -> dict[str, list[Path]]:
    """Every file under ``tests/fixtures`` by name (one walk)."""
    out: dict[str, list[Path]] = {}
    for path in sorted(FIXTURES.rglob("*")):
        out.setdefault(path.name, []).append(path)
    return out


def _sampled(name: str) -> str:
    """Columns (Parquet) or keys (JSON, JSON lines) of ``name`` in a committed fixture run."""
    for path in _fixtures().get(name, []):
        rel = path.relative_to(CLONE)
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            schema = pq.read_schema(path)
            cols = [f"`{f.name}` ({f.type})" for f in schema if not f.name.startswith("__")]
        elif name.endswith(".json"):
            doc = json.loads(path.read_text())
            cols = [f"`{k}`" for k in doc] if isinstance(doc, dict) else []
        elif name.endswith(".jsonl"):
            first = path.read_text().splitlines()[:1]
            cols = [f"`{k}`" for k in json.loads(first[0])] if first else []
        else:
            continue
        if cols:
            return ", ".join(cols) + f" (as stored in `{rel.parent.name[:40]}…`, `{rel.parts[2]}` fixture)"
    return ""


def _clause(text: str, name: str) -> str:
    """What ``text`` says right after ``name``: its parenthesis, or its clause."""
    at = text.index(f"``{name}``") + len(name) + 4
    rest = text[at:].lstrip(" :")
    depth, out = 0, list[str]()
    for i, ch in enumerate(rest):
        if ch == "(":
            depth += 1
            if depth == 1 and not out:
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0 and rest.startswith("("):
                break
        elif depth == 0 and (ch == ";" or (ch == "." and rest[i + 1:i + 2] in ("", " ", "\n"))):
            break
        out.append(ch)
    return " ".join("".join(out).split()).replace("``", "`").strip(" ,")


def _documented(name: str, writers: AbstractSet[str]) -> str:
    """What the docstrings of the writers' packages say of ``name``: the paragraph that says it
    is "stored as" it, else the clause right after its name."""
    packages = sorted({w.split(" ")[0].rsplit(".", 1)[0] for w in writers})
    clause = ""
    for pkg in packages:
        root = path_of(pkg)
        if root is None:
            continue
        for path in sorted(root.parent.glob("*.py")):
            for para in (docstring(path) or "").split("\n\n"):
                if f"stored as ``{name}``" in para:
                    text = " ".join(para.split()).replace("``", "`")
                    cut = text if len(text) <= 900 else text[:900].rsplit(" ", 1)[0] + " …"
                    return f"{cut} (`{module_name(path)}`)"
                if not clause and f"``{name}``" in para and (found := _clause(para, name)):
                    clause = f"{found} (`{module_name(path)}`)"
    return clause


def columns(name: str, writers: AbstractSet[str] = frozenset()) -> str:
    """What ``name`` holds: the code's declaration, else a committed fixture, else the paragraph
    of a writer's package docstring that describes it ('' if none)."""
    if name in DECLARED:
        return _declared(name)
    return _sampled(name) or (_documented(name, writers) if "." in name else "")


def page() -> str:
    """The results reference page (Markdown)."""
    found = scan()
    intro = (
        "A run is one directory, `results/<study>/<run>/`, written atomically: files go into "
        "`.<run>.partial` and the directory is renamed into place when the run completes; a "
        "failed run is kept as `<run>.failed` (with `error.txt`), an interrupted one leaves "
        "nothing, a deployment's discarded warm-up run is `<run>.warmup` "
        "(`juice.results.store`). Runs are found by their `manifest.json`, never by their "
        "directory names. From Python: `juice.results.tidy.load([Path(\"results/quickstart\")])` "
        "returns the tidy table of every run under a path.\n\n"
        "The files below are every name the code writes into a run directory. *Columns / keys* "
        "come from the constant the code writes and reads them with when there is one, else from "
        "a run committed under `tests/fixtures/` (an older run may lack a later column), else "
        "from what the writing package's docstrings say of the file; `—` where none of these "
        "exists yet: the study's page describes the file.")
    rows = []
    for name in sorted(found, key=lambda n: (n != "manifest.json", n)):
        f = found[name]
        rows.append([code(name), cell(WHAT.get(name, "")),
                     cell(", ".join(f"`{w}`" for w in sorted(f.writers))), cell(columns(name, f.writers))])
    body = table(["file", "what", "written by", "columns / keys"], rows)
    return header("Result files", "results.py", intro) + body
