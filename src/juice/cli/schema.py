"""``juice schema [STUDY] [--out FILE] [--dir DIR]``: the JSON Schema of a study's spec, made
from its pydantic model (the one ``study.parse`` validates with), so a YAML editor completes
and checks the spec's fields (``# yaml-language-server: $schema=...`` as a file's first line).

Without STUDY, one schema for every study: ``oneOf`` its studies, told apart by ``workload``
(a spec without ``workload:`` is the default study's, as ``juice.studies.of`` reads it).
``--dir DIR`` writes ``<study>.json`` for every study and ``all.json`` (``schemas/`` in the
clone holds them; a test regenerates them and compares).

What pydantic's schema cannot see is added here: a study whose WAN is uniform delays
(``WAN_INTO``) accepts ``wan: {delay_ms: [...]}`` before validation (``juice.spec.wan``), and a
study other than the default needs its ``workload:`` line, and a field a ``mode="before"``
validator reshapes takes what it takes: one value for a one-element list (``rate: 200``), a
name for an item with a required ``name`` (``scenarios: [boot_server]``). Checks made by validators (e.g. a
provider's hosts fitting the sites) stay the validators': ``juice plan`` runs them.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from juice.errors import UserError

DIALECT = "https://json-schema.org/draft/2020-12/schema"
WAN_DOC = ("one-way delays between every pair of sites, ms (0..500, no repeats): the runs sweep "
           "them (juice.spec.wan)")

STUDY = typer.Argument(None, help="A study (keystone, scheduler-db, messaging, nova, ...); "
                       "default: one schema for every study.", show_default=False)


def spec_model(name: str) -> type[BaseModel]:
    """The pydantic model study ``name`` validates its spec with: the study's ``spec_model``
    when it declares one, else the return type of its ``parse``."""
    from juice import studies

    study = studies.get(name)
    model = getattr(study, "spec_model", None)
    if model is None:
        model = typing.get_type_hints(type(study).parse).get("return")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise UserError(f"study {name!r}: its spec is not a pydantic model (no schema)")
    return model


def _before_fields(cls: type[BaseModel]) -> set[str]:
    """The fields of ``cls`` a ``mode="before"`` field validator reshapes."""
    out: set[str] = set()
    for dec in cls.__pydantic_decorators__.field_validators.values():
        if dec.info.mode == "before":
            out.update(dec.info.fields)
    return out


def _shorthand_item(annotation: Any) -> bool:
    """A list of models with a required ``name``: the before validator takes a bare name."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is not list:
        return len(args) == 1 and _shorthand_item(args[0])
    item = args[0] if args else None
    return (isinstance(item, type) and issubclass(item, BaseModel) and "name" in item.model_fields
            and item.model_fields["name"].is_required())


def _widen(prop: dict[str, Any], shorthand: bool) -> None:
    """``prop`` (a list field) also as its validator reads it: one value for a one-element
    list, or (``shorthand``) an item given by its name alone."""
    arrays = [prop] if prop.get("type") == "array" else [
        a for a in prop.get("anyOf", []) if isinstance(a, dict) and a.get("type") == "array"]
    for arr in arrays:
        item = arr.get("items")
        if not isinstance(item, dict):
            continue
        if shorthand:
            arr["items"] = {"anyOf": [item, {"type": "string", "description": "{name: ...} by its name"}]}
        elif arr is prop:
            body = {k: prop.pop(k) for k in list(prop) if k not in ("title", "description", "default")}
            prop["anyOf"] = [body, item]
        else:
            prop["anyOf"].append(item)


def _wan(model: type[BaseModel], props: dict[str, Any]) -> None:
    """Add ``wan: {delay_ms: [...]}`` where the model moves it into its own field."""
    if getattr(model, "WAN_INTO", None) is None or "wan" in props:
        return
    number = {"type": "number", "minimum": 0, "maximum": 500}
    delays: dict[str, Any] = {"type": "array", "items": number, "minItems": 1, "uniqueItems": True}
    if getattr(model, "WAN_SINGLE", False):
        delays["maxItems"] = 1
    props["wan"] = {"type": "object", "title": "Wan", "description": WAN_DOC,
                    "properties": {"delay_ms": {"anyOf": [delays, number]}},
                    "required": ["delay_ms"], "additionalProperties": False}


class _Inputs(GenerateJsonSchema):
    """pydantic's schema, plus what the models' before validators also accept."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        out = super().model_schema(schema)
        cls = schema["cls"]
        props = out.get("properties")
        if isinstance(props, dict) and isinstance(cls, type) and issubclass(cls, BaseModel):
            for name in sorted(_before_fields(cls)):
                if isinstance(props.get(name), dict) and name in cls.model_fields:
                    _widen(props[name], _shorthand_item(cls.model_fields[name].annotation))
            _wan(cls, props)
        return out


def _fix(name: str, schema: dict[str, Any], default: str) -> None:
    """Complete a model's own (top-level) schema for the registry's reading of a spec."""
    props: dict[str, Any] = schema.setdefault("properties", {})
    workload = props.setdefault("workload", {})
    workload["const"] = name
    if name != default:
        workload.pop("default", None)
        req: list[str] = schema.setdefault("required", [])
        if "workload" not in req:
            req.insert(0, "workload")


def study_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (2020-12) of study ``name``'s spec."""
    from juice import studies

    model = spec_model(name)
    body = model.model_json_schema(mode="validation", schema_generator=_Inputs)
    _fix(name, body, studies.DEFAULT)
    title = studies.get(name).title
    return {"$schema": DIALECT, **body,
            "title": f"Juice spec: {name} study",
            "description": f"A spec of the {title} study (workload: {name}). "
                           + (body.get("description") or "").strip()}


def combined_schema() -> dict[str, Any]:
    """One schema for every study: ``oneOf`` the studies' specs, exclusive by ``workload``."""
    from pydantic.json_schema import models_json_schema

    from juice import studies

    names = studies.names()
    models = {n: spec_model(n) for n in names}
    keys, top = models_json_schema([(m, "validation") for m in models.values()],
                                   ref_template="#/$defs/{model}",
                                   schema_generator=_Inputs)
    defs: dict[str, Any] = top.get("$defs", {})
    branches = []
    for n, m in models.items():
        ref = keys[(m, "validation")]["$ref"]
        target = defs[ref.rsplit("/", 1)[-1]]
        _fix(n, target, studies.DEFAULT)
        branches.append({"$ref": ref})
    return {"$schema": DIALECT, "title": "Juice spec",
            "description": "A Juice spec, any study: `workload:` names the study ("
                           + ", ".join(names) + f"; default {studies.DEFAULT}).",
            "oneOf": branches, "$defs": defs}


def schema_of(name: str | None) -> dict[str, Any]:
    return study_schema(name) if name else combined_schema()


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def files() -> dict[str, str]:
    """File name -> text of every schema ``--dir`` writes."""
    from juice import studies

    out = {f"{n}.json": text(study_schema(n)) for n in studies.names()}
    out["all.json"] = text(combined_schema())
    return out


def schema(study: str | None = STUDY,
           out: Path | None = typer.Option(None, "--out", "-o", help="Write the schema to FILE "
                                           "(atomically) instead of printing it."),
           to_dir: Path | None = typer.Option(None, "--dir", help="Write <study>.json for every "
                                              "study and all.json into DIR (e.g. schemas/).")) -> None:
    """Print the JSON Schema of a study's spec (from its pydantic model), for YAML editors.

    juice schema nova --out nova.json
    juice schema --dir schemas        # every study and all.json, as the clone's schemas/
    """
    from juice.util.atomic import write_text

    if to_dir is not None:
        if study or out is not None:
            raise UserError("--dir writes every study's schema: give no STUDY and no --out")
        written = files()
        for name, body in written.items():
            write_text(to_dir / name, body)
        typer.echo(f"wrote {len(written)} schemas to {to_dir}")
        return
    body = text(schema_of(study))
    if out is None:
        typer.echo(body, nl=False)
    else:
        write_text(out, body)


def register(app: typer.Typer) -> None:
    app.command(name="schema")(schema)
