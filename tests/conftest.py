"""Shared fixtures: root/namespace availability and unique lab names."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
from collections.abc import Callable, Iterator

import pytest

pytest_plugins = ["tests.server_census", "tests.parallel", "tests.stacks", "tests.load.rallycli",
                  "tests.noskip"]

def pytest_configure(config: pytest.Config) -> None:
    """The tests must test THIS clone: refuse, in one line, a venv whose editable install of
    juice points at another clone (the venv is shared between clones; the last one to run
    scripts/setup.sh wins)."""
    import juice

    here = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "src", "juice"))
    installed = os.path.realpath(os.path.dirname(juice.__file__))
    if installed != here:
        raise pytest.UsageError(f"the juice these tests would import is {installed}, not this clone's "
                                f"{here}: run `bash scripts/setup.sh` in this clone first (it re-points "
                                "the shared venv), or use scripts/test.sh, which does")


# This machine's own calibration (juice calibrate, /var/lib/juice/calibration) never decides a
# test's verdict: every test process and the `juice` commands they start read an empty
# directory of their own unless a test points JUICE_CALIBRATION_DIR elsewhere.
os.environ["JUICE_CALIBRATION_DIR"] = os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"juice-test-calibration-{os.getpid()}-none")


def lab_capable() -> str | None:
    """None when this machine can build labs, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if shutil.which("ip") is None or shutil.which("iptables-restore") is None:
        return "iproute2/iptables missing: run scripts/setup.sh"
    return None


@pytest.fixture
def lab_name() -> str:
    """A short unique lab name (tests never touch the user's `lab`)."""
    return "t" + secrets.token_hex(3)


# ---- `juice ARGS` in this process (fast enough for thousands of calls) ----

Juice = Callable[..., tuple[int, str, str]]


@pytest.fixture
def juice(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Juice]:
    """``juice(*args) -> (exit code, stdout, stderr)`` through ``juice.cli.app``: no leftover
    sweep (it needs root and is not under test), signal handlers restored afterwards."""
    import typer.main

    from juice.cli import app as cli

    monkeypatch.setattr(cli, "_sweep_leftovers", lambda: None)
    # the click command built once, not at every call (6 ms each; the mutation tests make
    # thousands of calls): main() registers the same commands every time
    cli._register()
    built, build = typer.main.get_command(cli.app), typer.main.get_command
    monkeypatch.setattr(typer.main, "get_command", lambda app: built if app is cli.app else build(app))
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


def said_lines(text: str) -> list[str]:
    """A command's non-empty output lines, without the start-up sweep's notice about another
    run's leftovers (any juice command removes a lab whose owner died — another test worker's
    killed run — and says so; that line is not the command's own answer)."""
    return [ln for ln in text.splitlines() if ln.strip() and "removed leftovers of lab" not in ln]
