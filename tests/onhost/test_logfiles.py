"""The log files program run at a place (``juice.onhost.logfiles``), run here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from juice import onhost
from juice.onhost import logfiles


def test_log_sizes_and_slices(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"0123456789")
    b.write_bytes(b"xy")
    assert logfiles.sizes([str(a), str(tmp_path / "none")]) == {str(a): 10, str(tmp_path / "none"): 0}
    dest = tmp_path / "out"
    got = logfiles.slices(str(dest), [str(a), "4", str(b), "0", str(tmp_path / "none"), "0"])
    assert got == {str(a): 6, str(b): 2, str(tmp_path / "none"): 0}
    assert (dest / "0").read_bytes() == b"456789" and (dest / "1").read_bytes() == b"xy"


def test_the_shipped_source_runs_with_python_c(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("hello")
    out = subprocess.run([sys.executable, "-c", onhost.source("logfiles"), "sizes", str(tmp_path / "a.log")],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {str(tmp_path / "a.log"): 5}
