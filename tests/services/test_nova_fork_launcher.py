"""The fork launcher of the juice-nova plugin (``juice_nova.fork``): its arguments, the node
directories it accepts, its pids file, and its parent's handling of the children (TERM
forwarded, KILL after the grace, a child that exits on its own stops the others). Pure: the
children here are plain forked test processes, not nova (the real ones: test_nova_fork.py)."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from juice.services.openstack.nova_compute import read_pids

FORK_PY = Path(__file__).resolve().parents[2] / "plugins" / "juice-nova" / "src" / "juice_nova" / "fork.py"


@pytest.fixture(scope="module")
def fork() -> ModuleType:
    """The plugin module, loaded from its file (it imports nova only in ``prepare``)."""
    spec = importlib.util.spec_from_file_location("juice_nova_fork_under_test", FORK_PY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve the module by name
    spec.loader.exec_module(mod)
    return mod


def node_dir(root: Path, host: str, conf: str | None = None) -> str:
    d = root / host
    d.mkdir()
    (d / "nova.conf").write_text(conf if conf is not None else
                                 f"# rendered by juice\n[DEFAULT]\nhost = {host}\nstate_path = {d}\n")
    return str(d)


def test_arguments_name_each_node_its_config_and_log(fork: Any, tmp_path: Path) -> None:
    dirs = [node_dir(tmp_path, f"juice-c1-n000{j}") for j in range(3)]
    args = fork.parse_args(["--fork-nodes", *dirs, "--pids-file", str(tmp_path / "p.json"), "--grace", "5"])
    assert [c.host for c in args.children] == ["juice-c1-n0000", "juice-c1-n0001", "juice-c1-n0002"]
    first = args.children[0]
    assert first.config == Path(dirs[0]) / "nova.conf"
    assert first.log == Path(dirs[0]) / "juice-c1-n0000.log"
    assert args.pids_file == tmp_path / "p.json" and args.grace_s == 5.0
    # the order of options does not matter
    again = fork.parse_args(["--pids-file", str(tmp_path / "p.json"), "--fork-nodes", *dirs])
    assert again.children == args.children and again.grace_s == fork.GRACE_S


@pytest.mark.parametrize(("argv", "says"), [
    (["--fork-nodes"], "--fork-nodes: give at least one node directory"),
    (["--fork-nodes", "{ok}"], "--pids-file: required"),
    (["--fork-nodes", "{ok}", "--pids-file"], "--pids-file: needs a value"),
    (["--fork-nodes", "{ok}", "--pids-file", "p", "--grace", "soon"], "--grace: expected seconds"),
    (["--fork-nodes", "{ok}", "--pids-file", "p", "--grace", "0"], "--grace: expected 0 < seconds"),
    (["--fork-nodes", "{ok}", "--pids-file", "p", "--config-file", "x"], "--config-file: unknown option"),
    (["{ok}", "--pids-file", "p"], "unexpected argument"),
    (["--fork-nodes", "{missing}", "--pids-file", "p"], "cannot read"),
    (["--fork-nodes", "{nohost}", "--pids-file", "p"], "sets no [DEFAULT] host"),
    (["--fork-nodes", "{ok}", "{ok}", "--pids-file", "p"], "given twice"),
    (["--fork-nodes", "{ok}", "{samehost}", "--pids-file", "p"], "given twice"),
])
def test_bad_arguments_are_one_line_errors(fork: Any, tmp_path: Path, argv: list[str], says: str) -> None:
    paths = {"ok": node_dir(tmp_path, "juice-c1-n0000"), "missing": str(tmp_path / "nowhere"),
             "nohost": node_dir(tmp_path, "x", "[DEFAULT]\n# host = x\n[other]\nhost = y\n"),
             "samehost": node_dir(tmp_path, "y", "[DEFAULT]\nhost = juice-c1-n0000\n")}
    with pytest.raises(fork.UsageError) as e:
        fork.parse_args([a.format(**paths) for a in argv])
    assert says in str(e.value) and "\n" not in str(e.value)


def test_main_exits_2_on_bad_arguments(fork: Any, capsys: Any) -> None:
    assert fork.main(["--fork-nodes"]) == 2  # before prepare(): nova is never imported for it
    err = capsys.readouterr().err.strip()
    assert err.startswith("juice-nova-compute: --fork-nodes:") and "\n" not in err


def test_host_is_read_from_the_default_section_only(fork: Any) -> None:
    conf = "[DEFAULT]\nmy_ip = 1.2.3.4\nhost = juice-c7-n0001\n[x]\nhost = other\n"
    assert fork.host_of(conf) == "juice-c7-n0001"
    assert fork.host_of("[x]\nhost = other\n[DEFAULT]\n;host = no\n") is None
    assert fork.host_of("[DEFAULT]\nhost =\n") is None


def test_pids_file_round_trip_and_partial_files(fork: Any, tmp_path: Path) -> None:
    path = tmp_path / "children.json"
    fork.write_pids(path, 10, {"juice-c1-n0000": 11, "juice-c1-n0001": 12})
    assert fork.read_pids(path.read_text()) == {"juice-c1-n0000": 11, "juice-c1-n0001": 12}
    assert read_pids(path.read_text()) == fork.read_pids(path.read_text())  # Juice's reader agrees
    assert not list(tmp_path.glob("*.tmp"))
    for bad in ("", "{", '{"parent": 1}', '{"children": [1, 2]}', '{"children": {"h": "x"}}'):
        assert read_pids(bad) == {} and fork.read_pids(bad) == {}


@pytest.fixture
def restore_signals() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in saved.items():
            signal.signal(s, h)
        import gc

        gc.unfreeze()


def fake_children(fork: Any, monkeypatch: pytest.MonkeyPatch, behave: dict[str, str]) -> None:
    """Children that sleep (``wait``), ignore TERM (``stubborn``) or exit at once (``exit``)."""

    def run_child(child: Any, parent: int) -> None:
        try:
            stubborn = behave[child.host] == "stubborn"
            signal.signal(signal.SIGTERM, signal.SIG_IGN if stubborn else signal.SIG_DFL)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            if behave[child.host] == "exit":
                os._exit(3)
            time.sleep(30)
        finally:
            os._exit(0)

    monkeypatch.setattr(fork, "run_child", run_child)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_parent_forwards_term_kills_after_the_grace_and_reaps(
        fork: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restore_signals: None) -> None:
    dirs = [node_dir(tmp_path, h) for h in ("n0", "n1")]
    fake_children(fork, monkeypatch, {"n0": "wait", "n1": "stubborn"})
    parent = fork.Parent(fork.parse_args(["--fork-nodes", *dirs, "--pids-file", str(tmp_path / "p.json"),
                                          "--grace", "0.5"]))
    parent.fork_all()
    pids = fork.read_pids((tmp_path / "p.json").read_text())
    assert set(pids) == {"n0", "n1"} and all(alive(p) for p in pids.values())
    time.sleep(0.2)  # the children set their TERM handling
    signal.signal(signal.SIGTERM, parent._term)
    os.kill(os.getpid(), signal.SIGTERM)  # what Juice's stop sends to the parent
    assert parent.wait() == 0  # n0 ended on TERM, n1 got KILL after 0.5 s
    assert parent.pids == {}
    assert not any(alive(p) for p in pids.values())  # reaped, not zombies


def test_a_child_that_exits_on_its_own_stops_the_others(
        fork: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restore_signals: None) -> None:
    dirs = [node_dir(tmp_path, h) for h in ("n0", "n1", "n2")]
    fake_children(fork, monkeypatch, {"n0": "wait", "n1": "exit", "n2": "wait"})
    parent = fork.Parent(fork.parse_args(["--fork-nodes", *dirs, "--pids-file", str(tmp_path / "p.json")]))
    parent.fork_all()
    pids = fork.read_pids((tmp_path / "p.json").read_text())
    assert parent.wait() == 1
    assert not any(alive(p) for p in pids.values())
