"""Offline preparation (``juice hosts prepare --offline``): what ``scripts/setup.sh`` would download
on a host, gathered once HERE into a bundle, copied to the host, installed from there only.

The bundle is made by ``scripts/offline-bundle.sh`` of the clone being prepared (once per digest
of its inputs, under ``<cache>/offline/<digest>``): the locked wheels of every venv, the Debian
packages setup.sh installs with their dependencies a bare Debian 12 lacks (a flat apt
repository), the native helpers built with the pinned Go, and ``SHA256SUMS`` of all of them.
On the host it goes to the same path, and ``JUICE_OFFLINE=<that path> bash scripts/setup.sh``
installs from it and nothing else; ``scripts/verify-setup.sh`` then checks each venv against its
lock and the helpers against the bundle.

    b = make_bundle(Path("/srv/juice"), Path("/var/cache/juice"), progress)   # minutes, once
    b.files, b.megabytes, b.info["wheels"]
    # hosts of your own (e.g. test hosts): the same preparation as `juice hosts prepare --offline`
    ctx = prepare.Context(source=clone, run_dir=logs, cache=cache_dir(), files=prepare.tracked_files(clone),
                          bundle=b)
    for o in prepare.prepare_all(targets, ctx):
        o.ok, o.copy_summary(), o.step_summary(), o.phases
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from juice.errors import LabError, UserError

BUNDLE_SCRIPT = "scripts/offline-bundle.sh"
VERIFY_SCRIPT = "scripts/verify-setup.sh"
BUNDLE_TIMEOUT_S = 3 * 3600.0
# What the host writes into its copy (apt's lists of the flat repository): never sent.
HOST_ONLY = ("apt/",)


@dataclass(frozen=True)
class Bundle:
    """A finished bundle here: its directory (the same path on every host), its files (relative,
    sorted) and its INFO (key=value)."""

    path: Path
    files: list[str]
    bytes: int
    info: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0  # how long making it took in this run (0: it was there)

    @property
    def megabytes(self) -> float:
        return self.bytes / 1e6


def parse_info(text: str) -> dict[str, str]:
    """INFO's ``key=value`` words (several per line)."""
    got: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("apt="):
            got["apt"] = line[4:]
            continue
        for word in line.split():
            if "=" in word:
                k, v = word.split("=", 1)
                got[k] = v
    return got


def bundle_files(path: Path) -> tuple[list[str], int]:
    """The files of the bundle in ``path`` (relative, sorted, what the host writes left out) and
    their total size."""
    files: list[str] = []
    total = 0
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for n in names:
            full = Path(root) / n
            rel = str(full.relative_to(path))
            if rel.startswith(HOST_ONLY) or full.is_symlink():
                continue
            files.append(rel)
            total += full.stat().st_size
    return sorted(files), total


def load_bundle(path: Path, seconds: float = 0.0) -> Bundle:
    """A finished bundle (UserError: not one)."""
    if not (path / "SHA256SUMS").is_file() or not (path / "INFO").is_file():
        raise UserError(f"{path}: not a finished bundle (no SHA256SUMS/INFO); make it with "
                        f"`bash {BUNDLE_SCRIPT}`")
    files, total = bundle_files(path)
    return Bundle(path, files, total, parse_info((path / "INFO").read_text(encoding="utf-8")), seconds)


def make_bundle(source: Path, cache: Path, progress: Callable[[str], None],
                log: Path | None = None) -> Bundle:
    """The bundle for the clone ``source`` (its scripts/offline-bundle.sh, run here with
    JUICE_CACHE=``cache``; made only when its digest is new), or LabError with the script's
    last lines."""
    script = source / BUNDLE_SCRIPT
    if not script.is_file():
        raise UserError(f"--source-dir {source}: no {BUNDLE_SCRIPT}: this clone cannot prepare hosts offline")
    start = time.monotonic()
    progress(f"offline bundle: {BUNDLE_SCRIPT} (once per lock digest; a first one downloads "
             "~500 MB and takes minutes)" + (f"; log: {log}" if log else ""))
    env = {**os.environ, "JUICE_CACHE": str(cache)}
    err = log.open("ab") if log is not None else None
    try:
        cp = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE,
                            stderr=err if err is not None else subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL, timeout=BUNDLE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise LabError(f"{BUNDLE_SCRIPT}: no bundle after {BUNDLE_TIMEOUT_S / 3600:.0f} h") from None
    finally:
        if err is not None:
            err.close()
    if cp.returncode != 0:
        text = (log.read_text(errors="replace") if log is not None
                else (cp.stderr or b"").decode(errors="replace"))
        lines = [x for x in text.splitlines() if x.strip()]
        why = lines[-1] if lines else f"exit {cp.returncode}"
        if cp.returncode == 2:
            raise UserError(why)
        raise LabError(f"{BUNDLE_SCRIPT} failed (exit {cp.returncode}): {why}")
    out = cp.stdout.decode(errors="replace").strip().splitlines()
    if not out:
        raise LabError(f"{BUNDLE_SCRIPT} printed no bundle path")
    b = load_bundle(Path(out[-1]), time.monotonic() - start)
    progress(f"offline bundle: {b.path}: {len(b.files)} files, {b.megabytes:.0f} MB "
             f"({b.info.get('wheels', '?')} wheels, {b.info.get('debs', '?')} .debs, "
             f"{b.info.get('bin', '?')} helper files)")
    return b
