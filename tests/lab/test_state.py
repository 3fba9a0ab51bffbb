from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from juice.lab import state


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUICE_STATE_DIR", str(tmp_path))


def test_save_load_roundtrip_and_remove() -> None:
    st = state.LabState(name="a", sites=2, spec={"sites": 2}, namespaces=["juice-a-core"])
    st.claim(ephemeral=False)
    state.save(st)
    got = state.load("a")
    assert got is not None and got.namespaces == ["juice-a-core"] and got.owner_pid == os.getpid()
    assert [s.name for s in state.all_states()] == ["a"]
    state.remove("a")
    assert state.load("a") is None


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_bring_up_whose_owner_died_is_stale() -> None:
    st = state.LabState(name="a", sites=2, spec={}, status="creating", owner_pid=_dead_pid())
    assert st.stale()


def test_a_ready_persistent_lab_is_kept_after_its_creator_exits() -> None:
    st = state.LabState(name="a", sites=2, spec={}, status="ready", owner_pid=_dead_pid())
    assert not st.stale()


def test_an_ephemeral_lab_dies_with_its_owner() -> None:
    st = state.LabState(name="a", sites=2, spec={}, status="ready", owner_pid=_dead_pid(),
                        ephemeral=True)
    assert st.stale()
    st.claim(ephemeral=True)
    assert not st.stale()


def test_corrupt_state_file_still_yields_a_sweepable_lab(tmp_path: Path) -> None:
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "b.json").write_text("{not json")
    got = state.load("b")
    assert got is not None and got.status == "destroying" and got.stale()
