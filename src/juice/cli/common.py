"""What every CLI group shares: the two consoles, the progress line, and ``--lab`` with the
running lab it names (``LAB_OPT``, ``open_lab``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from juice.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from juice.lab.local import LocalLab
    from juice.services.base import ServerRecordDict

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def progress(msg: str) -> None:
    """One dim line on stderr per step of a long operation."""
    err.print(f"[dim]·[/dim] {escape(msg)}")


def _lab_name(value: str) -> str:
    from juice.lab.spec import check_name

    return check_name(value, "--lab")


# ``--lab`` of the commands that act on a running lab (``juice db``, ``juice keystone``)
LAB_OPT = typer.Option("lab", "--lab", "-l", help="Name of a lab started with `juice lab up`.",
                       callback=_lab_name)


def open_lab(name: str, *, root: bool = True) -> LocalLab:
    """The running lab ``name`` (``--lab``); with ``root`` (what starts or stops servers)
    UserError first unless Juice runs as root."""
    from juice.lab.local import LocalLab, require_root

    if root:
        require_root()
    return LocalLab.get(name)


def servers_table(servers: Sequence[ServerRecordDict]) -> Table:
    """Recorded servers (services.json / keystone.json rows), with whether each still runs."""
    from juice.util import proc

    t = Table("kind", "site", "pid", "alive", "port", "log")
    for s in servers:
        t.add_row(s["kind"], str(s["site"]), str(s["pid"]),
                  "yes" if proc.alive(s["pid"], s["pid_start"]) else "NO", str(s["port"]), s["log"])
    return t


def check_level_html(level: float, html: Path | None) -> None:
    """``--level`` and ``--html`` of ``juice compare`` / ``juice trend``."""
    if not 0.5 <= level <= 0.999:
        raise UserError(f"--level: {level:g} is outside 0.5..0.999 (e.g. 0.95)")
    if html is not None and not html.parent.is_dir():
        raise UserError(f"--html {html}: directory {html.parent} does not exist (create it or give "
                        "another path)")
