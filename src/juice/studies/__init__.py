"""The registry of studies: the one place that knows them by name.

    study = studies.get("scheduler-db")           # a juice.contract.Study
    study, spec = studies.load_spec(Path("examples/quickstart.yaml"))
    for s in studies.all(): ...                    # built-in first, then plugins, then registered

Built-in studies are one line each in ``BUILTIN`` (name -> "module:attribute", imported on first
use). Other packages add studies through the ``juice.studies`` entry-point group (the value
names a Study instance), and tests through :func:`register`. A spec without ``workload:``
belongs to ``DEFAULT`` (the Keystone study, as before studies had names).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juice.contract import Data, Study
from juice.errors import UserError

if TYPE_CHECKING:
    from juice.load.api import Scenario
    from juice.report.html import Section

BUILTIN: dict[str, str] = {
    "keystone": "juice.studies.keystone:STUDY",
    "scheduler-db": "juice.studies.schedulerdb:STUDY",
    "messaging": "juice.studies.messaging:STUDY",
    "nova": "juice.studies.nova:STUDY",
}
DEFAULT = "keystone"
GROUP = "juice.studies"

_loaded: dict[str, Study[Any, Any]] = {}
_extra: dict[str, Study[Any, Any]] = {}


def _import(target: str) -> Study[Any, Any]:
    mod, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(mod), attr)
    if not isinstance(obj, Study):
        raise TypeError(f"{target} is not a juice.contract.Study instance")
    return obj


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=GROUP) if ep.name not in BUILTIN}


def names() -> list[str]:
    """Every study name: built-in, then plugins, then registered."""
    return list(dict.fromkeys([*BUILTIN, *_plugins(), *_extra]))


def get(name: str) -> Study[Any, Any]:
    """The study called ``name``; UserError listing the choices when there is none."""
    if name in _extra:
        return _extra[name]
    if name not in _loaded:
        target = BUILTIN.get(name) or _plugins().get(name)
        if target is None:
            raise UserError(f"workload: unknown study {name!r} (choose one of {', '.join(names())})")
        _loaded[name] = _import(target)
    return _loaded[name]


def all() -> list[Study[Any, Any]]:
    return [get(n) for n in names()]


def register(study: Study[Any, Any]) -> Study[Any, Any]:
    """Add ``study`` (e.g. from a test) under its ``name``; returns it."""
    _extra[study.name] = study
    return study


def unregister(name: str) -> None:
    _extra.pop(name, None)


def scenario(name: str, args: Data, contexts: Data | None = None,
             seed: int | None = None) -> Scenario:
    """The load-engine scenario called ``name`` by one of the studies; UserError if none knows it."""
    for study in all():
        found = study.scenario(name, args, contexts, seed)
        if found is not None:
            return found
    raise UserError(f"scenario: unknown {name!r} (no study knows it: {', '.join(names())})")


def resolve_scenario(name: str, args: Data, contexts: Data | None = None,
                     seed: int | None = None, study: str = "") -> Scenario:
    """The scenario object a load driver runs: ``"package.module:Class"`` is ``Class(**args)``;
    a name goes to the job's ``study`` first, then to the study that knows it. ``contexts``
    (Rally's, e.g. ``{"users": {"tenants": 2, "users_per_tenant": 3}}``) and ``seed`` go to
    registered scenarios only."""
    if ":" in name:
        from juice.load.drivers import import_scenario

        return import_scenario(name, args)
    if study:
        found = get(study).scenario(name, args, contexts or None, seed)
        if found is not None:
            return found
    return scenario(name, args, contexts or None, seed)


def report(paths: Sequence[Path], out_html: Path, sections: Sequence[Section] | None = None,
           filter_q: float | None = 0.95, params: Data | None = None) -> Path:
    """The HTML report of the runs under ``paths`` with every study's sections (in registry
    order), then ``sections``: ``juice.report.html.render`` given the studies."""
    from juice.report.html import render

    return render(paths, out_html, sections, filter_q, params, studies=all())


def of(data: Data, source: str) -> Study[Any, Any]:
    """The study a spec mapping selects with ``workload:`` (default ``DEFAULT``)."""
    workload = data.get("workload", DEFAULT)
    if not isinstance(workload, str):
        raise UserError(f"{source}: workload: expected a study name ({', '.join(names())}), "
                        f"got {type(workload).__name__}")
    try:
        return get(workload)
    except UserError as e:
        raise UserError(f"{source}: {e}") from None


def load_spec(path: Path, overrides: Sequence[str] = ()) -> tuple[Study[Any, Any], Any, dict[str, Any]]:
    """(study, validated spec, raw mapping) of the spec file at ``path``, with the ``--set``
    ``overrides`` applied (``juice.spec.overrides``) before validation; UserError (exit 2)
    with one line naming the file and the field otherwise."""
    from juice.spec.base import read_yaml
    from juice.spec.overrides import apply

    data = read_yaml(path)
    source = str(path)
    if overrides:
        data, _ = apply(data, overrides)
        source = f"{path} (with --set)"
    study = of(data, source)
    return study, study.parse(data, source), data
