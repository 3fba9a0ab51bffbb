"""The lab state file: what a lab created, written BEFORE it is created.

Every lab has ``<state_dir>/labs/<name>.json``. ``lab up`` records the namespaces, daemons
and work dir it is about to create (status ``creating``), then flips to ``ready``. A command
that finds a lab in ``creating``/``destroying`` whose owner process is gone, or an
``ephemeral`` lab (a test's or a run's) whose owner is gone, tears it down: this is how a
crashed or kill -9'd run's leftovers are removed on the next start.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from juice.paths import state_dir
from juice.util import atomic, proc

STATE_VERSION = 1


@dataclass
class LabState:
    """What one lab owns. Saved as JSON; unknown future fields are ignored on load."""

    name: str
    sites: int
    spec: dict[str, object]  # the LabSpec, as JSON
    status: str = "creating"  # creating | ready | destroying
    owner_pid: int = 0
    owner_start: int | None = None
    ephemeral: bool = False
    namespaces: list[str] = field(default_factory=list)
    backend: str = ""
    daemon_pid: int = 0
    daemon_start: int | None = None
    partitioned: list[int] = field(default_factory=list)
    workdir: str = ""
    created_at: float = field(default_factory=time.time)
    version: int = STATE_VERSION

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LabState:
        """From the saved JSON (its fields as written: a dataclass does not check them)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def owner_alive(self) -> bool:
        return self.owner_pid > 0 and proc.alive(self.owner_pid, self.owner_start)

    def stale(self) -> bool:
        """True when nobody will finish or use this lab: it must be torn down."""
        if self.owner_alive():
            return False
        return self.status != "ready" or self.ephemeral

    def claim(self, ephemeral: bool) -> None:
        """Make the current process the owner."""
        self.owner_pid = os.getpid()
        self.owner_start = proc.start_time(self.owner_pid)
        self.ephemeral = ephemeral


def labs_dir() -> Path:
    return state_dir() / "labs"


def path_of(name: str) -> Path:
    return labs_dir() / f"{name}.json"


def save(state: LabState) -> None:
    atomic.write_json(path_of(state.name), asdict(state))


def load(name: str) -> LabState | None:
    try:
        return LabState.from_dict(json.loads(path_of(name).read_text()))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, TypeError):
        # A corrupt file can only come from outside tampering (writes are atomic):
        # keep what we can (the name) so teardown still sweeps the namespaces.
        return LabState(name=name, sites=0, spec={}, status="destroying")


def remove(name: str) -> None:
    path_of(name).unlink(missing_ok=True)


def all_states() -> list[LabState]:
    d = labs_dir()
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.glob("*.json")):
        st = load(p.stem)
        if st is not None:
            out.append(st)
    return out


@contextmanager
def locked() -> Iterator[None]:
    """Serialize changes to lab state between juice processes (flock, released on crash)."""
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
