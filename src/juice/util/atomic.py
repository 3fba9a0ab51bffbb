"""Atomic file writes: write a temp file in the same directory, fsync, rename."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new file, never half."""
    write_bytes(path, text.encode(), mode)


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``write_text`` for bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: object) -> None:
    """Atomically write ``data`` as indented JSON."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
