"""toolbatch: one import of a management tool, one forked process per command (no server:
a toy tool stands in for keystone-manage, whose real runs are in the Keystone and nova tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from juice.errors import ServiceError
from juice.lab.place import ThisHost
from juice.services.toolbatch import Step, run_batch

TOOL = '''
import os, sys, time
IMPORTS = int(os.environ.get("TOY_IMPORTS", "0")) + 1
os.environ["TOY_IMPORTS"] = str(IMPORTS)
with open(os.path.join(os.environ["TOY_DIR"], "imports"), "a") as f:
    f.write("import\\n")

def main():
    cmd = sys.argv[1]
    print(f"{cmd} pid={os.getpid()} argv={sys.argv} secret={os.environ.get('TOY_SECRET', '-')}")
    d = os.environ["TOY_DIR"]
    if cmd == "wait-for":            # returns once the other command of its group has started
        open(os.path.join(d, "started-" + sys.argv[2]), "w").close()
        for _ in range(400):
            if os.path.exists(os.path.join(d, "started-" + sys.argv[3])):
                return 0
            time.sleep(0.05)
        return 3
    if cmd == "fail":
        print("something went wrong", file=sys.stderr)
        return 4
    if cmd == "hang":
        time.sleep(60)
    if cmd == "exit":
        sys.exit(int(sys.argv[2]))
    return 0
'''


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    (tmp_path / "toytool.py").write_text(TOOL)
    return tmp_path


def _run(toy: Path, groups: list[list[Step]]) -> dict[str, float]:
    env = {"PYTHONPATH": str(toy), "TOY_DIR": str(toy)}
    return run_batch(ThisHost(), Path(sys.executable), "toytool:main", groups, workdir=toy / "w", env=env)


def test_commands_share_one_import_run_in_their_own_processes_with_their_own_logs(toy: Path) -> None:
    logs = [toy / "logs" / f"{n}.log" for n in ("a", "b", "c")]
    done = _run(toy, [
        [Step("toy a", ["toy-manage", "wait-for", "a", "b"], logs[0]),
         Step("toy b", ["toy-manage", "wait-for", "b", "a"], logs[1])],   # a group: both at once
        [Step("toy c", ["toy-manage", "plain"], logs[2], env={"TOY_SECRET": "s3"})],
    ])
    assert set(done) == {"import", "toy a", "toy b", "toy c"}
    assert (toy / "imports").read_text().count("import") == 1
    texts = [p.read_text() for p in logs]
    assert all(t.startswith("--- toy ") for t in texts)
    pids = {t.split("pid=")[1].split()[0] for t in texts}
    assert len(pids) == 3                               # a process per command
    assert "argv=['toy-manage', 'plain']" in texts[2] and "secret=s3" in texts[2]
    assert "secret=-" in texts[0]                       # a step's environment is its own


def test_a_failure_names_the_command_with_its_log_and_later_groups_do_not_run(toy: Path) -> None:
    later = toy / "logs" / "later.log"
    with pytest.raises(ServiceError, match=r"^toy broken failed with code 4 \(log: .*something went wrong"):
        _run(toy, [[Step("toy broken", ["toy-manage", "fail"], toy / "logs" / "f.log"),
                    Step("toy fine", ["toy-manage", "plain"], toy / "logs" / "ok.log")],
                   [Step("toy later", ["toy-manage", "plain"], later)]])
    assert not later.exists()
    assert "plain" in (toy / "logs" / "ok.log").read_text()   # its group ran to the end


def test_sys_exit_codes_count_and_a_command_past_its_timeout_is_killed(toy: Path) -> None:
    assert "toy exit0" in _run(toy, [[Step("toy exit0", ["toy-manage", "exit", "0"], toy / "e.log")]])
    with pytest.raises(ServiceError, match="^toy exit2 failed with code 2"):
        _run(toy, [[Step("toy exit2", ["toy-manage", "exit", "2"], toy / "e.log")]])
    with pytest.raises(ServiceError, match=r"^toy hang failed with code -9"):
        _run(toy, [[Step("toy hang", ["toy-manage", "hang"], toy / "h.log", timeout_s=0.5)]])


def test_an_entry_that_cannot_be_imported_is_a_one_line_error(toy: Path) -> None:
    with pytest.raises(ServiceError, match=r"^toy x: .*ModuleNotFoundError"):
        run_batch(ThisHost(), Path(sys.executable), "no_such_tool:main",
                  [[Step("toy x", ["x"], toy / "x.log")]], workdir=toy / "w", env={})
