"""The host agent as a process on this machine (what runs on each SSH host): requests are
answered as they finish, so a probe is not held up by a long command; state-changing requests
take turns; the end stops what it started and removes its directory."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

AGENT = Path(__file__).resolve().parents[2] / "src" / "juice" / "hosts" / "agent.py"


class Agent:
    def __init__(self, base: Path) -> None:
        boot = (f"import runpy, sys; g = runpy.run_path({str(AGENT)!r}, run_name='juice_agent'); "
                f"g['BASE'] = {str(base)!r}; g['main'].__globals__['BASE'] = {str(base)!r}; "
                f"g['main']('juice-test')")
        self.proc = subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.buf = b""
        self.root = base / "juice-test"

    def send(self, rid: int, op: str, **req: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": rid, "op": op, **req}) + "\n")
        self.proc.stdin.flush()

    def read(self, limit_s: float = 60) -> dict[str, Any]:
        """The next answer (bounded: an agent that never answers fails the test)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([fd], [], [], limit_s)
            assert ready, f"no answer from the agent in {limit_s:g} s"
            chunk = os.read(fd, 65536)
            assert chunk, "the agent closed its output"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg: dict[str, Any] = json.loads(line)
        return msg

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    a = Agent(tmp_path / "base")
    try:
        a.send(1, "hello")
        assert a.read()["ok"]
        yield a
    finally:
        a.close()


def test_a_probe_is_answered_while_a_long_command_runs(agent: Agent) -> None:
    # the command waits until the probe's answer has been read: only an agent that answers
    # concurrently can answer the probe first
    flag = agent.root / "probe-answered"
    agent.send(2, "exec", cmds=[{"argv": ["sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done"],
                                 "timeout": 60}])
    agent.send(3, "ping")
    first = agent.read(limit_s=30)
    assert first["id"] == 3 and first["ok"]
    flag.touch()
    second = agent.read()
    assert second["id"] == 2 and second["results"][0]["rc"] == 0


def test_spawns_in_parallel_are_all_recorded_and_stopped_at_the_end(agent: Agent) -> None:
    for i in range(8):
        agent.send(10 + i, "spawn", argv=["sleep", "600"], log=f"s1/p{i}.log")
    answers = [agent.read() for _ in range(8)]
    assert sorted(a["id"] for a in answers) == list(range(10, 18)) and all(a["ok"] for a in answers)
    pids = sorted(a["pid"] for a in answers)
    state = json.loads((agent.root / "agent.json").read_text())
    assert sorted(p for p, _ in state["procs"]) == pids  # none lost to a concurrent save
    agent.send(20, "bye")
    assert agent.read() == {"id": 20, "ok": True}
    agent.proc.wait(timeout=60)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert not agent.root.exists()


def test_an_unknown_operation_is_an_error_and_the_agent_stays_up(agent: Agent) -> None:
    agent.send(5, "frobnicate")
    bad = agent.read()
    assert bad["id"] == 5 and not bad["ok"] and "unknown op 'frobnicate'" in bad["error"]
    agent.send(6, "ping")
    assert agent.read()["ok"]
