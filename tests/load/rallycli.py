"""The REAL Rally command line for the tests that hand it Juice's files.

``rally_cli`` (a fixture) gives ``rally(*args) -> stdout`` on a database of the test's own that
already holds Rally's schema and an environment named ``juice``: ``rally db create`` and
``rally env create`` run once per worker process (4-6 s of CPU: each ``rally`` process imports
Rally), and each test gets a copy of that database file.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from juice.paths import cache_dir

RALLY = cache_dir() / "rally" / "bin" / "rally"
Rally = Callable[..., str]


def _command(conf: Path, cwd: Path, timeout: float) -> Rally:
    def rally(*args: str) -> str:
        cp = subprocess.run([str(RALLY), "--config-file", str(conf), *args], cwd=cwd, capture_output=True,
                            text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, f"rally {' '.join(args)}: {cp.stdout[-2000:]}{cp.stderr[-2000:]}"
        return cp.stdout
    return rally


def _conf(where: Path) -> Path:
    conf = where / "rally.conf"
    conf.write_text(f"[database]\nconnection = sqlite:///{where}/rally.sqlite\n")
    return conf


@pytest.fixture(scope="session")
def rally_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Rally database with its schema and the environment ``juice`` (no deployment: imported
    tasks need none)."""
    if not RALLY.exists():
        pytest.skip("Rally venv missing: run scripts/setup.sh")
    where = tmp_path_factory.mktemp("rally-template")
    rally = _command(_conf(where), where, 120)
    rally("db", "create")
    rally("env", "create", "--name", "juice", "--no-use")
    return where / "rally.sqlite"


@pytest.fixture
def rally_cli(rally_template: Path, tmp_path: Path) -> Rally:
    shutil.copyfile(rally_template, tmp_path / "rally.sqlite")
    return _command(_conf(tmp_path), tmp_path, 120)
