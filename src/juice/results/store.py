"""One directory per run, made atomically: files are written into ``.<run>.partial`` and the
directory is renamed into place only when the run completes. A crash leaves complete runs
plus at most one ``.partial`` directory, which the next ``RunDir`` in that place removes.

Every run carries ``manifest.json``: what was asked (spec), what ran (versions, host facts,
WAN backend), and when.

Names that are never counted as runs (:func:`counted`): hidden ones (``.<run>.partial``),
``<run>.failed`` and ``<run>.warmup`` (a discarded warm-up run of a deployment, kept for
inspection: ``juice.sweep.sweep``; a warm-up that failed is ``<run>.warmup.failed``). Every
place that lists runs asks :func:`counted`.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TypedDict

from juice import __version__
from juice.util import atomic

MANIFEST_VERSION = 1
WARMUP_SUFFIX = ".warmup"
NOT_COUNTED = (".failed", ".partial", WARMUP_SUFFIX)


def counted(name: str) -> bool:
    """Whether a directory named ``name`` can be a run that counts: not hidden, not failed,
    not partial, not a warm-up run."""
    return not name.startswith(".") and not name.endswith(NOT_COUNTED)


class HostFacts(TypedDict):
    """A manifest's ``host``."""

    hostname: str
    kernel: str
    cpus: int | None
    mem_gib: float
    python: str
    machine: str


def host_facts() -> HostFacts:
    """What the numbers depend on: kernel, CPUs, memory, Python."""
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {"hostname": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
            "mem_gib": round(mem_kib / 1024 / 1024, 1), "python": platform.python_version(),
            "machine": platform.machine()}


def tool_version(argv: list[str]) -> str:
    """First line of ``argv`` (e.g. ``mariadbd --version``), or 'absent'."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return "absent"
    return (cp.stdout or cp.stderr).strip().splitlines()[0] if (cp.stdout or cp.stderr) else "?"


class RunDir:
    """``with RunDir(root, "quickstart") as run: run.write_json("x.json", ...)``.

    On success the run is at ``run.path``; on failure it is kept as ``<name>.failed`` with
    whatever was written (errors are data too), never as a half-written success. On Ctrl-C
    (or SIGTERM, which Juice turns into the same) nothing is kept.
    """

    def __init__(self, root: Path, name: str, suffix: str = "") -> None:
        """``suffix``: appended after the stamp (``WARMUP_SUFFIX`` for a warm-up run)."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = root
        self.name = f"{name}-{stamp}{suffix}"
        self.path = root / self.name
        self.partial = root / f".{self.name}.partial"
        self.started = time.time()

    def __enter__(self) -> RunDir:
        self.root.mkdir(parents=True, exist_ok=True)
        for old in self.root.glob(".*.partial"):
            shutil.rmtree(old, ignore_errors=True)
        self.partial.mkdir()
        return self

    def file(self, rel: str) -> Path:
        """Where to write ``rel`` inside the (still partial) run."""
        p = self.partial / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write_json(self, rel: str, data: object) -> Path:
        atomic.write_json(self.file(rel), data)
        return self.path / rel

    def write_text(self, rel: str, text: str) -> Path:
        atomic.write_text(self.file(rel), text)
        return self.path / rel

    def manifest(self, **fields: object) -> None:
        data = {"version": MANIFEST_VERSION, "run": self.name, "juice": __version__,
                "started_at": self.started, "host": host_facts(), **fields}
        self.write_json("manifest.json", data)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is None:
            os.replace(self.partial, self.path)
            return
        if issubclass(et, KeyboardInterrupt):
            # Interrupted, not failed: leave nothing, so a resumed sweep simply redoes it.
            shutil.rmtree(self.partial, ignore_errors=True)
            return
        self._keep_failed(f"{et.__name__}: {ev}")

    def _keep_failed(self, error: str) -> None:
        failed = self.root / f"{self.name}.failed"
        for k in range(2, 1000):  # the same run failed earlier in the same second (a resumed sweep)
            if not failed.exists():
                break
            failed = self.root / f"{self.name}-{k}.failed"
        atomic.write_text(self.partial / "error.txt", f"{error}\n")
        os.replace(self.partial, failed)
        self.path = failed

    @classmethod
    def failed_before(cls, root: Path, name: str, error: BaseException) -> Path:
        """Record a run that failed before it could start (e.g. its deployment did not come up):
        kept as ``<name>-<stamp>.failed`` with its error.txt, like a run that failed; its path."""
        rd = cls(root, name).__enter__()
        rd._keep_failed(f"{type(error).__name__}: {error}")
        return rd.path


def study_runs(paths: Sequence[Path], workload: str, needs: Sequence[str] = ()) -> list[Path]:
    """Complete run directories of ``workload`` under ``paths`` (each a run or a study
    directory), with every file of ``needs``; failed, warm-up and hidden directories are skipped
    (:func:`counted`)."""
    import json

    out: list[Path] = []
    for p in paths:
        cands = [p] if (p / "manifest.json").exists() else (
            sorted(d for d in p.iterdir() if d.is_dir() and counted(d.name)) if p.is_dir() else [])
        for d in cands:
            try:
                man = json.loads((d / "manifest.json").read_text())
            except (OSError, ValueError):
                continue
            if (isinstance(man, dict) and man.get("workload") == workload
                    and all((d / n).exists() for n in needs)):
                out.append(d)
    return out
