"""Several commands of one OpenStack management tool (``keystone-manage``, ``nova-manage``) run
at a place with ONE import of the tool, instead of one interpreter per command.

Each ``keystone-manage`` or ``nova-manage`` process spends about 2 s of CPU importing its code
before it does anything (1.8 s and 2.1 s here); a Keystone bring-up runs four of them and a
nova bring-up four more. ``run_batch`` ships ``toolbatch_runner.py`` to the place, which
imports the tool once and forks one child per command: every command still runs the tool's own
``main`` with its own arguments, environment and configuration parse, in its own process (a
group's commands at once, groups in order), with its output in its own log as before::

    durations = run_batch(place, VENV / "bin" / "python", "keystone.cmd.manage:main", [
        [Step("keystone-manage db_sync", ["keystone-manage", "--config-file", conf, "db_sync"], log1),
         Step("keystone-manage fernet_setup", [...], log2)],
        [Step("keystone-manage bootstrap", [...], log3, env={"OS_BOOTSTRAP_PASSWORD": pw})],
    ], workdir=home)
    durations["import"], durations["keystone-manage db_sync"], ...     # seconds

A failed command raises ServiceError naming it, with its log's tail; the groups after it do not
run. The runner works unchanged in a lab namespace or on an SSH host (a Place).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from juice.errors import ServiceError
from juice.lab.place import Place

RUNNER = Path(__file__).with_name("toolbatch_runner.py")


@dataclass(frozen=True)
class Step:
    """One command: ``argv[0]`` is the tool's name (its ``sys.argv[0]``)."""

    what: str
    argv: Sequence[str | Path]
    log: Path
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 600.0


def run_batch(place: Place, python: Path, entry: str, groups: Sequence[Sequence[Step]], *,
              workdir: Path, env: Mapping[str, str] | None = None) -> dict[str, float]:
    """Run ``groups`` at ``place`` (see the module doc); returns each command's duration by its
    ``what`` and the import's as ``"import"``. Bounded: each command by its timeout, the whole
    batch by their sum per group plus a minute."""
    place.mkdir(workdir)
    for group in groups:
        for step in group:
            place.mkdir(step.log.parent)
    runner, spec = workdir / "toolbatch_runner.py", workdir / "toolbatch.json"
    place.write(runner, RUNNER.read_text())
    place.write(spec, json.dumps({"entry": entry, "groups": [
        [{"what": s.what, "argv": [str(a) for a in s.argv], "log": str(s.log), "env": dict(s.env),
          "timeout_s": s.timeout_s} for s in group] for group in groups]}), mode=0o600)
    budget = sum(max(s.timeout_s for s in group) for group in groups if group) + 60.0
    try:
        r = place.run([str(python), str(runner), str(spec)], timeout=budget, env=dict(env or {}))
    finally:
        place.remove(spec)  # it may hold a password (keystone's bootstrap)
    done: dict[str, tuple[int, float]] = {}
    for line in r.out.splitlines():
        try:
            rec = json.loads(line)
            done[str(rec["what"])] = (int(rec["rc"]), float(rec["s"]))
        except (ValueError, KeyError, TypeError):
            continue
    steps = [s for group in groups for s in group]
    for s in steps:
        rc = done.get(s.what, (None, 0.0))[0]
        if rc is not None and rc != 0:
            raise ServiceError(f"{s.what} failed with code {rc} (log: {_tail(place, s.log)})")
    if r.rc != 0 or "import" not in done:
        missing = [s.what for s in steps if s.what not in done]
        what = missing[0] if missing else steps[0].what if steps else entry
        why = r.err.strip().splitlines()[-3:] if r.err.strip() else [f"exit code {r.rc}"]
        raise ServiceError(f"{what}: {' | '.join(why)} (log: {_tail(place, steps[0].log) if steps else '-'})")
    return {k: s for k, (_, s) in done.items()}


def _tail(place: Place, log: Path) -> str:
    text = (place.read(log) or b"").decode(errors="replace")
    return " | ".join(text.strip().splitlines()[-5:]) or "(no output)"
