"""`juice ARGS` in this process (``juice`` fixture): fast enough for thousands of calls."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator

import pytest

Juice = Callable[..., tuple[int, str, str]]


@pytest.fixture
def juice(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Juice]:
    """``juice(*args) -> (exit code, stdout, stderr)`` through ``juice.cli.main``: commands
    registered once, no leftover sweep (it needs root and is not under test), signal handlers
    restored afterwards."""
    from juice import cli

    original = cli._register

    def register_once() -> None:
        if not any(c.name == "plan" for c in cli.app.registered_commands):
            original()

    monkeypatch.setattr(cli, "_register", register_once)
    monkeypatch.setattr(cli, "_sweep_leftovers", lambda: None)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def run(*args: str) -> tuple[int, str, str]:
        argv = sys.argv
        sys.argv = ["juice", *args]
        try:
            cli.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        finally:
            sys.argv = argv
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    for s, h in saved.items():
        signal.signal(s, h)
