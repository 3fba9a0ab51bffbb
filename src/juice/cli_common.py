"""What every CLI group shares: the two consoles and the progress line."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def progress(msg: str) -> None:
    """One dim line on stderr per step of a long operation."""
    err.print(f"[dim]·[/dim] {escape(msg)}")
