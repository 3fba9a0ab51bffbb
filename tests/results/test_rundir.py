"""RunDir: a run is kept whole on success, as ``.failed`` with its error on failure (also when it
failed before it could start), and not at all when interrupted."""

from __future__ import annotations

from pathlib import Path

import pytest

from juice.errors import JuiceError
from juice.results.store import RunDir


def test_success_failure_and_interrupt(tmp_path: Path) -> None:
    with RunDir(tmp_path, "ok") as rd:
        rd.write_json("x.json", {"a": 1})
    assert rd.path.is_dir() and (rd.path / "x.json").exists()
    with pytest.raises(JuiceError), RunDir(tmp_path, "bad") as bad:
        bad.write_text("log.txt", "kept\n")
        raise JuiceError("the server said no")
    assert bad.path.name.endswith(".failed") and (bad.path / "log.txt").read_text() == "kept\n"
    assert (bad.path / "error.txt").read_text() == "JuiceError: the server said no\n"
    with pytest.raises(KeyboardInterrupt), RunDir(tmp_path, "stopped"):
        raise KeyboardInterrupt
    assert not [p for p in tmp_path.iterdir() if "stopped" in p.name]


def test_failed_before_it_started_never_collides(tmp_path: Path) -> None:
    first = RunDir.failed_before(tmp_path, "run", JuiceError("deployment failed before the run: x"))
    again = RunDir.failed_before(tmp_path, "run", JuiceError("deployment failed before the run: y"))
    assert first != again and first.name.endswith(".failed") and again.name.endswith(".failed")
    assert (first / "error.txt").read_text() == "JuiceError: deployment failed before the run: x\n"
    assert (again / "error.txt").read_text().endswith("y\n")
    assert not list(tmp_path.glob(".*.partial"))
