"""The CLI's help and error paths (no root needed)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import Juice, said_lines

COMMANDS = [[], ["lab"], ["lab", "up"], ["lab", "status"], ["lab", "check"], ["lab", "down"],
            ["lab", "sweep"], ["lab", "partition"], ["lab", "heal"], ["lab", "set-wan"], ["lab", "exec"],
            ["db"], ["db", "up"], ["db", "status"], ["db", "down"], ["quickstart"], ["run"], ["plan"],
            ["cleanup"], ["analyze"], ["report"], ["trace"], ["sla"], ["compare"], ["trend"],
            ["calibrate"], ["schema"], ["export"], ["export", "openmetrics"], ["keystone"],
            ["keystone", "up"], ["keystone", "status"], ["keystone", "down"], ["hosts"],
            ["hosts", "prepare"], ["docs"], ["docs", "build"], ["docs", "serve"]]


def juice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "juice.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def _tree() -> dict[tuple[str, ...], Any]:
    """Every command and group of the real click app, by its path of names."""
    import click
    import typer.main

    from juice.cli import app as cli

    cli._register()
    out: dict[tuple[str, ...], Any] = {}

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        out[path] = cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))

    walk(typer.main.get_command(cli.app), ())
    return out


TREE = _tree()


def test_the_listed_commands_are_every_command() -> None:
    assert sorted(TREE) == sorted(tuple(c) for c in COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "juice")
def test_every_command_has_help(cmd: list[str], juice: Juice) -> None:
    """--help prints the command's usage, its own summary and every option it takes."""
    code, out, err = juice(*cmd, "--help")  # in this process: 30 commands, no interpreter each
    assert code == 0, err
    text = " ".join(out.replace("│", " ").split())
    assert f"Usage: juice {' '.join(cmd)}".rstrip() in text
    command = TREE[tuple(cmd)]
    summary = " ".join((command.help or "").split()).split(". ")[0][:60]
    assert summary and summary in text, (summary, text[:400])
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("--"):
                assert opt in text, f"{' '.join(cmd)} --help does not list {opt}"


def test_version() -> None:
    cp = juice("--version")
    assert cp.returncode == 0 and cp.stdout.startswith("juice ")


def test_unknown_command_suggests_and_exits_2() -> None:
    cp = juice("lab", "chek")
    assert cp.returncode == 2
    assert "chek" in cp.stderr and "Did you mean 'check'" in cp.stderr


def test_missing_sites_is_a_one_line_usage_error() -> None:
    cp = juice("lab", "up", "--delay", "5")
    assert cp.returncode == 2
    assert "--sites" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1


def test_a_malformed_flag_value_is_one_line_naming_the_option() -> None:
    cp = juice("lab", "up", "--sites", "3", "--delay", "fast")
    assert cp.returncode == 2
    lines = said_lines(cp.stderr)
    assert len(lines) == 1 and "--delay" in lines[0] and "juice lab up --help" in lines[0]


def test_shell_completion_completes_commands_and_options() -> None:
    """click's completion (typer's --install-completion / --show-completion) answers for
    commands, subcommands and options without running the command."""
    import os

    def complete(words: str) -> list[str]:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1),
               "_JUICE_COMPLETE": "complete_bash"}
        cp = subprocess.run([sys.executable, "-m", "juice.cli"], capture_output=True, text=True,
                            timeout=60, check=False, env=env)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout.split()

    assert complete("juice ex") == ["export"]
    assert "openmetrics" in complete("juice export ")
    assert complete("juice sla --j") == ["--junit"]
    # the shell named, not detected (typer's switch: detection needs a parent shell)
    cp = subprocess.run([sys.executable, "-m", "juice.cli", "--show-completion", "zsh"],
                        capture_output=True, text=True, timeout=60, check=False,
                        env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert cp.returncode == 0 and "compdef _juice_completion juice" in cp.stdout, cp.stderr
