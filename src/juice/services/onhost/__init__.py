"""Programs the services run AT a place (a site's namespace or an SSH host, with the place's
``python3``): standard library only, each sent as its own source (``source(name)``) with
``python3 -c``, so they are type-checked, linted and unit-tested here like the rest."""

from __future__ import annotations

from pathlib import Path


def source(name: str) -> str:
    """The source of ``juice.services.onhost.<name>``, as sent to a place."""
    return (Path(__file__).parent / f"{name}.py").read_text()
