"""kill -9 of a run that holds a lab with a real database: the next juice command removes
the namespaces, the server processes and their data."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from juice.lab import netns
from juice.paths import work_dir
from tests.services.conftest import needs_lab

pytestmark = needs_lab


def _servers_under(path: Path) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if str(path) in line and "mariadbd" in line]


def test_killed_run_with_mariadb_leaves_nothing() -> None:
    name = "k" + secrets.token_hex(3)
    code = ("import time\n"
            "from juice.lab import LocalLab, spec\n"
            "from juice.services.databases.mariadb import MariaDBCentral\n"
            f"lab = LocalLab.up(spec.parse({{'name': '{name}', 'sites': 2, 'delay_ms': 1}}),"
            " ephemeral=True)\n"
            "MariaDBCentral(lab).up()\n"
            "print('up', flush=True)\n"
            "time.sleep(300)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "up"
        assert _servers_under(work_dir() / name)
    finally:
        p.kill()
        p.wait()
    assert [ns for ns in netns.list_all() if ns.startswith(f"juice-{name}-")]
    subprocess.run([sys.executable, "-m", "juice.cli", "lab", "status", "--name", "nosuchlab"],
                   capture_output=True, timeout=120, check=False)
    assert [ns for ns in netns.list_all() if ns.startswith(f"juice-{name}-")] == []
    assert _servers_under(work_dir() / name) == []
    assert not (work_dir() / name).exists()


@pytest.mark.parametrize("kind", ["nosuchdb"])
def test_db_up_with_an_unknown_kind_exits_2(kind: str) -> None:
    cp = subprocess.run([sys.executable, "-m", "juice.cli", "db", "up", "--kind", kind],
                        capture_output=True, text=True, timeout=60, check=False)
    assert cp.returncode == 2 and "kind" in cp.stderr
