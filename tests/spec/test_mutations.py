"""Every example spec, mutated hundreds of ways, through `juice plan` in this process.

For each spec of examples/ and benchmarks/ (deterministic, seeded per file): wrong types at
every leaf (bool, string, list, mapping, null, NaN, ±inf, huge, negative, zero, a float for an
int...), out-of-range values, an unknown key at every level, every key deleted at every level,
emptied and duplicated lists, and whole-file damage (broken YAML, empty, binary junk, a list
or a scalar at the top). Each outcome must be one of:

- exit 2 with exactly one line on stderr, naming the file and, for a field mutation, a field
  path (for a type error, the mutated field itself), and no traceback;
- exit 0 with a plan whose estimate is finite, within the 30-day cap of one spec, and no
  ``nan`` / ``inf`` anywhere in the output.

Counts per spec are printed (``pytest -s``).
"""

from __future__ import annotations

import copy
import math
import os
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.spec.base import MAX_PLAN_S
from tests.conftest import Juice

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(ROOT.glob("examples/*.yaml")) + sorted(ROOT.glob("benchmarks/*.yaml"))
NAN, INF = float("nan"), float("inf")
# wrong types: each must be rejected where a number, a name or a list is expected
WRONG_TYPES: list[tuple[str, Any]] = [
    ("true", True), ("false", False), ("string", "x"), ("numeric string", "5"), ("empty string", ""),
    ("list", [1]), ("empty list", []), ("mapping", {"a": 1}), ("empty mapping", {}), ("null", None),
    ("nan", NAN), ("inf", INF), ("-inf", -INF),
]
# out of range (for numbers) or plain wrong values
OUT_OF_RANGE: list[tuple[str, Any]] = [
    ("huge float", 1e12), ("huge int", 10**12), ("enormous int", 10**30), ("negative", -1),
    ("negative float", -0.5), ("zero", 0), ("fraction", 0.5), ("251", 251), ("10001", 10_001),
    ("float 1e308", 1e308), ("tiny", 1e-300),
]
FILE_LEVEL: list[tuple[str, bytes]] = [
    ("empty file", b""),
    ("whitespace only", b"  \n\n"),
    ("null document", b"~\n"),
    ("top-level list", b"- name: x\n- rdbms: [mariadb]\n"),
    ("top-level scalar", b"42\n"),
    ("top-level string", b"just some words\n"),
    ("broken yaml", b"name: [unclosed\nrdbms: {\n"),
    ("tab indentation", b"name: x\n\trdbms: [mariadb]\n"),
    ("python tag", b"!!python/object/apply:os.system ['true']\n"),
    ("binary junk", bytes(random.Random(7).randrange(256) for _ in range(512))),
    ("utf-16 text", "name: x\n".encode("utf-16")),
    ("NUL bytes", b"name: x\x00\nrdbms: [mariadb]\n"),
    ("deep nesting", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n"),
]
Path_ = tuple[str | int, ...]
PER_SPEC = int(os.environ.get("JUICE_MUTATIONS_PER_SPEC", "250"))  # 0: all of them


@dataclass(frozen=True)
class Mutation:
    label: str
    kind: str          # "type", "range", "unknown", "delete", "list", "file"
    path: Path_ | None
    build: Callable[[], bytes]  # the mutated file, made only for the mutations sampled

    @property
    def content(self) -> bytes:
        return self.build()


def nodes(data: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every node of ``data`` with its path (root first)."""
    yield path, data
    if isinstance(data, dict):
        for k, v in data.items():
            yield from nodes(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from nodes(v, (*path, i))


def replaced(data: Any, path: Path_, value: Any) -> Any:
    out = copy.deepcopy(data)
    parent = out
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return out


def deleted(data: Any, path: Path_) -> Any:
    out = copy.deepcopy(data)
    parent = out
    for p in path[:-1]:
        parent = parent[p]
    del parent[path[-1]]
    return out


DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: the same YAML, faster


def dump(data: Any) -> bytes:
    return yaml.dump(data, Dumper=DUMPER, sort_keys=False, allow_unicode=True).encode()


def mutations(spec: Path) -> list[Mutation]:
    """The deterministic mutations of ``spec`` (seeded by its name)."""
    rng = random.Random(f"juice-mutations:{spec.name}")
    data = yaml.safe_load(spec.read_text())
    text = spec.read_bytes()
    out: list[Mutation] = []

    def add(label: str, kind: str, path: Path_, value: Any) -> None:
        out.append(Mutation(f"{label} at {fmt(path)}", kind, path,
                            lambda: dump(replaced(data, path, value))))

    for path, value in nodes(data):
        if path and not isinstance(value, dict | list):
            for label, v in WRONG_TYPES:
                kind = "type" if type(v) is not type(value) else "range"
                if kind == "type" or v != value:
                    add(label, kind, path, v)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            for label, v in [*OUT_OF_RANGE, ("random int", rng.randint(-10**9, 10**9)),
                             ("random float", rng.uniform(-1e7, 1e7))]:
                if numeric or rng.random() < 0.3:  # numbers: all; other leaves: a sample
                    add(label, "range", path, v)
            if numeric:
                for label, v in (("x1000", value * 1000), ("+1", value + 1),
                                 ("as float", float(value) + 0.25)):
                    add(label, "range", path, v)
            if isinstance(value, str):
                for label, v in (("typo", value + "x"), ("upper", value.upper()), ("NUL", value + "\x00"),
                                 ("very long", value * 200), ("newline", value + "\nx")):
                    add(label, "range", path, v)
        if isinstance(value, dict):
            for key in ("bogus_key", f"{next(iter(value), 'x')}s"):
                if key not in value:
                    add("unknown key", "unknown", (*path, key), 1)
            for key in value:
                out.append(Mutation(f"deleted {fmt((*path, key))}", "delete", (*path, key),
                                    lambda path=path, key=key: dump(deleted(data, (*path, key)))))
        if isinstance(value, list) and path:
            add("emptied", "list", path, [])
            if value:
                add("first item duplicated", "list", path, [*value, value[0]])
        if isinstance(value, dict | list) and path:
            for label, v in (("scalar 7", 7), ("string", "x"), ("nan", NAN), ("null", None)):
                add(f"{label} instead of a {type(value).__name__}", "type", path, v)
    out = sample(out, rng) if PER_SPEC else out
    out += [Mutation(label, "file", None, lambda c=content: c) for label, content in FILE_LEVEL]
    cut = rng.randrange(len(text) // 3, len(text))
    truncated = text[:cut] + b"\n  - [\n"
    out.append(Mutation(f"truncated at byte {cut}", "file", None, lambda: truncated))
    junk = bytes(rng.randrange(256) for _ in range(200))
    appended = text + b"\n" + junk
    out.append(Mutation("junk appended", "file", None, lambda: appended))
    return out


def sample(muts: list[Mutation], rng: random.Random) -> list[Mutation]:
    """At most PER_SPEC - file-level mutations (the whole test stays under a minute): every
    unknown-key, deleted-key and list mutation; then one type and one range mutation of every
    leaf; then others at random; in their original order."""
    keep = {i for i, m in enumerate(muts) if m.kind in ("unknown", "delete", "list")}
    order = list(range(len(muts)))
    rng.shuffle(order)
    firsts: set[tuple[str, Path_ | None]] = set()
    for i in order:
        m = muts[i]
        if (m.kind, m.path) not in firsts:
            firsts.add((m.kind, m.path))
            keep.add(i)
    room = PER_SPEC - len(FILE_LEVEL) - 2
    for i in order:
        if len(keep) >= room:
            break
        keep.add(i)
    return [m for i, m in enumerate(muts) if i in keep]


def fmt(path: Path_) -> str:
    return ".".join(str(p) for p in path)


ESTIMATE = re.compile(r"estimated\s+([0-9.]+)\s+(s|min|h)\b")
NONFINITE = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)
PATH_AT_START = re.compile(r"^([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*): ")
UNIT_S = {"s": 1.0, "min": 60.0, "h": 3600.0}


def check(m: Mutation, f: Path, code: int, out: str, err: str) -> str | None:
    """None when the outcome is acceptable, else what is wrong."""
    if "Traceback" in out + err:
        return f"traceback: {(out + err)[-300:]}"
    if code == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1:
            return f"{len(lines)} lines on stderr: {err!r}"
        prefix = f"error: {f}: "
        if not lines[0].startswith(prefix):
            return f"the error does not name the file: {lines[0]!r}"
        rest = lines[0][len(prefix):]
        if m.kind in ("type", "range", "unknown", "delete", "list"):
            named = PATH_AT_START.match(rest)
            whole_spec = re.search(r"runs|points|days|combinations|study|expected a mapping", rest)
            if named is None and whole_spec is None:
                return f"a field error that names no field: {lines[0]!r}"
            if m.kind == "type" and m.path and named is not None and not m.label.startswith("null"):
                got = named.group(1)
                want = fmt(m.path)
                if not (got.startswith(want) or want.startswith(got)) and m.path[0] != "workload":
                    return f"a type error at {want} reported at {got}: {lines[0]!r}"
        return None
    if code == 0:
        flat = " ".join(out.split())
        est = ESTIMATE.search(flat)
        if est is None:
            return f"no estimate in the plan: {flat[-300:]!r}"
        seconds = float(est.group(1)) * UNIT_S[est.group(2)]
        if not math.isfinite(seconds) or seconds > MAX_PLAN_S * 1.001:
            return f"estimate {est.group(0)!r} is not finite or beyond the cap"
        if NONFINITE.search(out):
            return f"nan/inf in the plan: {NONFINITE.search(out)!r}"
        return None
    return f"exit code {code}: {(out + err)[-300:]!r}"


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_mutated_specs_are_rejected_in_one_line_or_planned_sanely(
        spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], juice: Juice,
        request: pytest.FixtureRequest) -> None:
    muts = mutations(spec)
    assert len(muts) >= 100
    f = tmp_path / spec.name
    results = tmp_path / "results"
    outcomes: Counter[str] = Counter()
    problems: list[str] = []
    accepted: list[str] = []
    for m in muts:
        f.write_bytes(m.content)
        code, out, err = juice("plan", str(f), "--results", str(results), "--limit", "5")
        outcomes["rejected" if code == 2 else "accepted" if code == 0 else f"exit {code}"] += 1
        if code == 0 and os.environ.get("JUICE_MUTATIONS_SHOW"):
            accepted.append(m.label)
        problem = check(m, f, code, out, err)
        if problem:
            problems.append(f"{m.label}: {problem}")
    report = [f"{spec.parent.name}/{spec.name}: {len(muts)} mutations: {outcomes['rejected']} rejected, "
              f"{outcomes['accepted']} accepted", *(f"  accepted: {label}" for label in accepted)]
    if request.config.getoption("capture") == "no":  # pytest -s
        with capsys.disabled():
            print("\n" + "\n".join(report))
    else:  # shown with a failure
        sys.stderr.write("\n".join(report) + "\n")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])
    assert outcomes["rejected"] >= len(muts) // 2
    assert outcomes["accepted"] >= 1
