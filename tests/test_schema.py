"""``juice schema``: the committed schemas/ are what the models give (they cannot drift), every
example starts with the modeline naming its study's schema and is valid against it.

``jsonschema`` is not in the lock (scripts/lock/juice.txt), so the examples are checked by a
small validator of the 2020-12 keywords pydantic emits (``_errors`` below: $ref, type,
properties, required, additionalProperties, items, prefixItems, anyOf/oneOf/allOf, const,
enum, bounds, lengths, pattern, uniqueItems) and by the study's own pydantic model."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from juice import studies
from juice.cli.schema import combined_schema, files, study_schema
from juice.spec.base import read_yaml

ROOT = Path(__file__).parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
MODELINE = re.compile(r"^# yaml-language-server: \$schema=\.\./schemas/([a-z0-9-]+)\.json\n")
TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                         "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def _errors(v: Any, s: Any, root: dict[str, Any], at: str = "") -> list[str]:
    """Where ``v`` breaks schema ``s`` (empty: valid)."""
    if s is True or s == {}:
        return []
    if s is False:
        return [f"{at}: not allowed"]
    out: list[str] = []
    if "$ref" in s:
        node: Any = root
        for part in s["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        out += _errors(v, node, root, at)
    if "type" in s:
        kinds = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_is(v, k) for k in kinds):
            return [*out, f"{at}: {v!r} is not {kinds}"]
    if "const" in s and v != s["const"]:
        out.append(f"{at}: {v!r} != {s['const']!r}")
    if "enum" in s and v not in s["enum"]:
        out.append(f"{at}: {v!r} not in {s['enum']}")
    for sub in s.get("allOf", []):
        out += _errors(v, sub, root, at)
    if "anyOf" in s and all(_errors(v, sub, root, at) for sub in s["anyOf"]):
        out.append(f"{at}: matches none of anyOf: "
                   + " | ".join("; ".join(_errors(v, sub, root, at)) for sub in s["anyOf"]))
    if "oneOf" in s:
        ok = sum(not _errors(v, sub, root, at) for sub in s["oneOf"])
        if ok != 1:
            out.append(f"{at}: matches {ok} of oneOf")
    if _is(v, "number"):
        for key, bad in (("minimum", lambda lim: v < lim), ("maximum", lambda lim: v > lim),
                         ("exclusiveMinimum", lambda lim: v <= lim),
                         ("exclusiveMaximum", lambda lim: v >= lim)):
            if key in s and bad(s[key]):
                out.append(f"{at}: {v!r} breaks {key} {s[key]}")
        if isinstance(v, float) and not math.isfinite(v):
            out.append(f"{at}: not finite")
    if isinstance(v, str):
        if len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", math.inf):
            out.append(f"{at}: length of {v!r}")
        if "pattern" in s and not re.search(s["pattern"], v):
            out.append(f"{at}: {v!r} does not match {s['pattern']}")
    if isinstance(v, dict):
        props = s.get("properties", {})
        out += [f"{at}.{k}: required" for k in s.get("required", []) if k not in v]
        for k, item in v.items():
            if k in props:
                out += _errors(item, props[k], root, f"{at}.{k}")
            elif "additionalProperties" in s:
                out += _errors(item, s["additionalProperties"], root, f"{at}.{k}")
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", math.inf):
            out.append(f"{at}: {len(v)} items")
        if s.get("uniqueItems") and len({json.dumps(x, sort_keys=True) for x in v}) != len(v):
            out.append(f"{at}: items repeat")
        prefix = s.get("prefixItems", [])
        for i, item in enumerate(v):
            sub = prefix[i] if i < len(prefix) else s.get("items", True)
            out += _errors(item, sub, root, f"{at}.{i}")
    return out


def test_the_validator_catches_what_an_editor_flags() -> None:
    schema = study_schema("messaging")
    data = read_yaml(ROOT / "examples" / "messaging.yaml")
    assert _errors(data, schema, schema) == []
    assert any("required" in e for e in _errors({k: v for k, v in data.items() if k != "workload"},
                                                schema, schema))
    assert _errors({**data, "bogus": 1}, schema, schema)
    assert _errors({**data, "repetitions": 0}, schema, schema)
    assert _errors({**data, "wan": {"delay_ms": [0, 0]}}, schema, schema)


def test_committed_schemas_are_the_models() -> None:
    """schemas/ as `juice schema --dir schemas` writes it now (regenerate after a spec change)."""
    want = files()
    have = {p.name: p.read_text() for p in (ROOT / "schemas").glob("*.json")}
    assert sorted(have) == sorted(want), "run: juice schema --dir schemas"
    for name, text in want.items():
        assert have[name] == text, f"schemas/{name} is stale: run `juice schema --dir schemas`"


def test_schemas_keep_titles_descriptions_and_the_dialect() -> None:
    for name in studies.names():
        s = study_schema(name)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert s["title"] and name in s["title"] and s["description"]
        assert s["properties"]["workload"]["const"] == name
        assert s["properties"]["name"].get("description")
        assert ("workload" in s.get("required", [])) == (name != studies.DEFAULT)
    everything = combined_schema()
    assert len(everything["oneOf"]) == len(studies.names())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_names_and_fits_its_schema(path: Path) -> None:
    text = path.read_text()
    m = MODELINE.match(text)
    assert m, f"{path.name}: the first line must be # yaml-language-server: $schema=../schemas/<study>.json"
    data = read_yaml(path)
    study = studies.of(data, str(path))
    assert m.group(1) == study.name
    schema = json.loads((ROOT / "schemas" / f"{study.name}.json").read_text())
    assert _errors(data, schema, schema) == []
    everything = json.loads((ROOT / "schemas" / "all.json").read_text())
    assert _errors(data, everything, everything) == []
    study.parse(data, str(path))  # and the model itself


def test_the_command_prints_and_writes(tmp_path: Path) -> None:
    def juice(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "juice.cli", *args], capture_output=True,
                              text=True, timeout=60, check=False, cwd=ROOT)

    cp = juice("schema", "nova")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["properties"]["workload"]["const"] == "nova"
    out = tmp_path / "all.json"
    cp = juice("schema", "--out", str(out))
    assert cp.returncode == 0, cp.stderr and "oneOf" in json.loads(out.read_text())
    cp = juice("schema", "nosuch")
    assert cp.returncode == 2 and "unknown study" in cp.stderr
