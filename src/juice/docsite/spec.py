"""The spec reference: every field of every study's spec with its type, default, allowed range
and description, flattened from the JSON Schema ``juice schema STUDY`` prints (made from the
pydantic model ``juice plan`` validates with), so the page and the validation are one source."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from juice.docsite.markdown import cell, code, header, table

Schema = dict[str, Any]
MAX_DEPTH = 8


@dataclass(frozen=True)
class Field:
    """One spec field: its dotted path (``[]`` for a list's items) and what the schema says."""

    path: str
    type: str
    default: str
    allowed: str
    description: str
    required: bool


def _resolve(node: Schema, defs: Schema) -> Schema:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.rsplit("/", 1)[-1], {})
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return merged
    return node


def _branches(node: Schema, defs: Schema) -> list[Schema]:
    """The alternatives of ``node`` (itself when it has none), resolved."""
    node = _resolve(node, defs)
    alts = node.get("anyOf") or node.get("oneOf")
    if isinstance(alts, list):
        return [b for a in alts for b in _branches(a, defs)]
    return [node]


def _type(node: Schema, defs: Schema) -> str:
    names: list[str] = []
    for b in _branches(node, defs):
        if "const" in b:
            n = json.dumps(b["const"])
        elif "enum" in b:
            n = " | ".join(json.dumps(v) for v in b["enum"])
        elif b.get("type") == "array":
            n = f"list of {_type(b.get('items', {}), defs)}" if b.get("items") else "list"
        elif b.get("type") == "object" and b.get("title") and b.get("properties"):
            n = f"{b['title']} (object)"
        elif b.get("type") == "object" and isinstance(b.get("additionalProperties"), dict):
            n = f"map of {_type(b['additionalProperties'], defs)}"
        else:
            t = b.get("type", "any")
            n = " | ".join(t) if isinstance(t, list) else str(t)
        if n not in names:
            names.append(n)
    return " | ".join(names)


def _bounds(b: Schema) -> list[str]:
    out = []
    lo, hi = b.get("minimum"), b.get("maximum")
    xlo, xhi = b.get("exclusiveMinimum"), b.get("exclusiveMaximum")
    if lo is not None and hi is not None:
        out.append(f"{lo}..{hi}")
    else:
        out += [f"≥ {lo}"] if lo is not None else []
        out += [f"≤ {hi}"] if hi is not None else []
    out += [f"> {xlo}"] if xlo is not None else []
    out += [f"< {xhi}"] if xhi is not None else []
    for key, word in (("minItems", "≥ {} items"), ("maxItems", "≤ {} items"),
                      ("minLength", "≥ {} chars"), ("maxLength", "≤ {} chars"),
                      ("minProperties", "≥ {} keys"), ("maxProperties", "≤ {} keys")):
        if key in b:
            out.append(word.format(b[key]))
    if b.get("uniqueItems"):
        out.append("no repeats")
    if "pattern" in b:
        out.append(f"matches `{b['pattern']}`")
    return out


def _allowed(node: Schema, defs: Schema) -> str:
    parts: list[str] = []
    for b in _branches(node, defs):
        got = _bounds(b)
        if b.get("type") == "array" and isinstance(b.get("items"), dict):
            inner = [x for ib in _branches(b["items"], defs) for x in _bounds(ib)]
            got += [f"each {x}" for x in inner]
        for g in got:
            if g not in parts:
                parts.append(g)
    return ", ".join(parts)


def _objects(node: Schema, defs: Schema) -> list[tuple[str, Schema]]:
    """(suffix, object schema) under ``node`` whose fields are listed: the object itself, or a
    list's items (suffix ``[]``), or a map's values (suffix ``.<key>``)."""
    out: list[tuple[str, Schema]] = []
    for b in _branches(node, defs):
        if isinstance(b.get("properties"), dict):
            out.append(("", b))
        elif b.get("type") == "array" and isinstance(b.get("items"), dict):
            out += [("[]" + s, o) for s, o in _objects(b["items"], defs)]
        elif isinstance(b.get("additionalProperties"), dict):
            out += [(".<key>" + s, o) for s, o in _objects(b["additionalProperties"], defs)]
    return out


def fields(schema: Schema) -> list[Field]:
    """Every field of ``schema`` (a study's spec), depth first, in the model's order."""
    defs: Schema = schema.get("$defs", {})
    out: list[Field] = []
    seen: set[str] = set()

    def visit(obj: Schema, prefix: str, depth: int) -> None:
        required = set(obj.get("required", []))
        for name, prop in obj.get("properties", {}).items():
            path = f"{prefix}{name}"
            node = _resolve(prop, defs)
            desc = prop.get("description") or node.get("description") or ""
            default = json.dumps(prop["default"]) if "default" in prop else ""
            out.append(Field(path, _type(prop, defs), default, _allowed(prop, defs), desc,
                             name in required))
            if depth >= MAX_DEPTH:
                continue
            for suffix, sub in _objects(prop, defs):
                key = f"{path}{suffix}:{sub.get('title')}"
                if key in seen:
                    continue
                seen.add(key)
                visit(sub, f"{path}{suffix}.", depth + 1)

    visit(schema, "", 0)
    return out


def study_page(name: str) -> str:
    """The spec reference of study ``name`` (Markdown)."""
    from juice import studies
    from juice.cli.schema import study_schema

    schema = study_schema(name)
    rows = fields(schema)
    undescribed = sum(1 for f in rows if not f.description)
    intro = (f"Every field a `workload: {name}` spec accepts ({studies.get(name).title}), "
             f"from the JSON Schema `juice schema {name}` prints (`schemas/{name}.json` in the "
             "clone; a YAML editor completes and checks fields from it, see "
             "[Exports and editors](../guides/exports.md#the-specs-json-schema)). `a.b` is field "
             "`b` of section `a`; `a[]` the items of list `a`; `a.<key>` the values of map `a`. "
             "An unknown key, a value out of range or of the wrong type is refused by "
             "`juice plan` in one line naming the field (exit 2); the checks across fields "
             "(e.g. a provider's hosts fitting the sites) are `juice plan`'s only.\n\n"
             + (f"Description `—`: the model gives none yet ({undescribed} of {len(rows)} fields); "
                "its type, default and range are still the model's." if undescribed else "")
             + "\n\n" + cell(schema.get("description", "")))
    body = table(["field", "type", "default", "allowed", "description"],
                 [[code(f.path) + (" *(required)*" if f.required else ""), cell(f.type),
                   code(f.default) if f.default else "—", cell(f.allowed), cell(f.description)]
                  for f in rows])
    return header(f"Spec fields: {name}", "spec.py", intro) + body


def pages() -> dict[str, str]:
    """``reference/spec-<study>.md`` for every registered study."""
    from juice import studies

    return {f"reference/spec-{n}.md": study_page(n) for n in studies.names()}
