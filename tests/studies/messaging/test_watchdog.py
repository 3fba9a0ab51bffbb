"""A messaging run whose clients stop recording messages fails after the no-progress bound,
naming the client processes it waits on and their place; one that progresses does not."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from juice.errors import JuiceError, UserError
from juice.studies.messaging import agents as ag
from juice.util.watchdog import Stalled, Watchdog, stall_bound


class FakePlace:
    """A place whose record files have fixed (or growing) line counts."""

    def __init__(self, site: int, counts: dict[str, int], grow: bool = False) -> None:
        self.site, self.counts, self.grow = site, counts, grow
        self.label = f"site {site} (host h{site})"
        self.root = Path("/nonexistent")

    def run(self, argv: list[str], timeout: float = 30) -> Any:
        lines = []
        for f in argv[2:-1]:
            name = Path(f).name.removesuffix(".jsonl")
            if self.grow:
                self.counts[name] = self.counts.get(name, 0) + 1
            lines.append(f"  {self.counts.get(name, 0)} {f}")
        return SimpleNamespace(out="\n".join(lines) + "\n", ok=True, rc=0, err="")


class Running:
    proc = object()
    what = "agent process"

    def exit_code(self) -> int | None:
        return None


def _run(tmp_path: Path, grow: bool) -> tuple[ag.AgentRun, list[str]]:
    said: list[str] = []
    places = {1: FakePlace(1, {"c1-0": 89}, grow), 3: FakePlace(3, {"c3-0": 12}, grow)}
    lab = SimpleNamespace(place=lambda k: places[k])
    ar = ag.AgentRun(lab, tmp_path, lambda s: "", "", said.append,  # type: ignore[arg-type]
                     duration_s=1.0, timeout_s=1.0, length=1, pool=1, poll_s=0.05)
    ar.procs = [ag.ProcPlan("c1-0", 1, "client", [ag.Agent("c1", "client", 1, "t", "cast")], 5.0),
                ag.ProcPlan("c3-0", 3, "client", [ag.Agent("c3", "client", 3, "t", "cast")], 5.0)]
    ar.servers = {"c1-0": Running(), "c3-0": Running()}  # type: ignore[dict-item]
    ar.places = places  # type: ignore[assignment]
    return ar, said


def test_stalled_clients_fail_the_run_naming_what_they_wait_on(tmp_path: Path) -> None:
    ar, said = _run(tmp_path, grow=False)
    with pytest.raises(Stalled) as e:
        ar.wait_clients(limit_s=30.0, stall_s=0.4)
    msg = str(e.value)
    assert isinstance(e.value, JuiceError)  # the sweep keeps the run as .failed and goes on
    assert "no progress for" in msg and "stuck at 101" in msg
    assert "c1-0 (site 1 (host h1), 1 client(s)): 89 messages" in msg
    assert "c3-0 (site 3 (host h3), 1 client(s)): 12 messages" in msg
    assert said[0] == "sending: 101 messages so far"


def test_progressing_clients_run_to_the_limit(tmp_path: Path) -> None:
    ar, _ = _run(tmp_path, grow=True)
    with pytest.raises(JuiceError) as e:
        ar.wait_clients(limit_s=0.6, stall_s=0.3)
    assert not isinstance(e.value, Stalled) and "still running after" in str(e.value)


def test_the_bound() -> None:
    clock = [0.0]
    dog = Watchdog(60.0, "boots", clock=lambda: clock[0])
    dog.see(3)
    clock[0] = 59.0
    dog.check(lambda: "nothing")
    assert dog.see(4) is True and dog.see(4) is False
    clock[0] = 120.0
    with pytest.raises(Stalled, match="boots stuck at 4; waiting on driver 2"):
        dog.check(lambda: "driver 2")
    assert stall_bound(None) == 60.0 and stall_bound(1.0) == 60.0 and stall_bound(30.0) == 300.0
    assert stall_bound(0.01, extra_s=90.0) == 90.0


def test_the_bound_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUICE_STALL_S", "7.5")
    assert stall_bound(100.0) == 7.5
    monkeypatch.setenv("JUICE_STALL_S", "soon")
    with pytest.raises(UserError, match="JUICE_STALL_S"):
        stall_bound()
