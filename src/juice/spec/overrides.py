"""``--set key=value`` task arguments (Rally's ``--task-args``): change a spec's mapping before
it is validated, so an override is checked exactly like the file.

    data, args = apply(read_yaml(path), ["runner.times=200", "wan.delay_ms=[0, 50]"])

``key`` is a dotted path into the spec (``runner.times``, ``wan.delay_ms``; a number indexes a
list: ``scenarios.0.args.x``); missing mappings on the way are created. ``value`` is read as
YAML (``200`` a number, ``[0, 50]`` a list, ``true`` a bool, ``galera`` a string; quote to
force a string: ``name='"007"'``). Errors are one line naming the ``--set`` (exit 2).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import yaml

from juice.errors import UserError


def parse_one(item: str) -> tuple[list[str], object]:
    key, eq, raw = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise UserError(f"--set {item}: expected KEY=VALUE (e.g. --set runner.times=200)")
    parts = key.split(".")
    if any(not p for p in parts):
        raise UserError(f"--set {item}: empty part in the key {key!r} (e.g. runner.times)")
    try:
        value: object = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        first = (str(e).splitlines() or ["?"])[0]
        raise UserError(f"--set {item}: the value is not valid YAML ({first}); quote it") from None
    return parts, value


def _put(node: object, parts: list[str], value: object, item: str) -> None:
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise UserError(f"--set {item}: {where}: the list has {len(node)} entries; give an "
                                f"index 0..{len(node) - 1}")
            if last:
                node[int(part)] = value
                return
            node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
                return
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
        else:
            raise UserError(f"--set {item}: {'.'.join(parts[:i])} is a {type(node).__name__}, "
                            f"not a mapping: {where} cannot be set")


def apply(data: Mapping[str, object], items: Sequence[str]) -> tuple[dict[str, object], dict[str, object]]:
    """(the spec mapping with every override applied, {key: value} of the overrides)."""
    out = copy.deepcopy(dict(data))
    args: dict[str, object] = {}
    for item in items:
        parts, value = parse_one(item)
        _put(out, parts, value, item)
        args[".".join(parts)] = value
    return out, args


def arguments(items: Sequence[str]) -> dict[str, object]:
    """{key: value} of the overrides (what a manifest records as ``task_args``)."""
    return {".".join(parts): value for parts, value in map(parse_one, items)}
