"""`juice hosts prepare SPEC` (juice.hosts.prepare, juice.cli.hosts).

- Fast (no server, no root): the errors (no provider, kind local, an unreachable host on a
  loopback port nobody listens on), the commands as built, and the whole pipeline through a
  stand-in ssh that runs each command here with the clone's path mapped to another directory
  ("the same path on another machine"): what differs is sent, a second run sends nothing, a
  setup's timeout, Ctrl-C stopping what runs.
- Real (separate test hosts, tests/testhosts.py: their own root filesystems, processes and
  sshd): a scratch clone copied to a bare host (the Debian image: nothing of Juice) and a
  --command run there; and scripts/setup.sh itself with its verification on a prepared host
  (its own disk: this machine's venvs are never touched).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from juice.cli.hosts import clone_dir
from juice.hosts import prepare as prep
from juice.lab.provider import StaticHost
from juice.paths import cache_dir
from tests import testhosts
from tests.conftest import Juice
from tests.services.conftest import needs_lab


def _spec(path: Path, provider: dict[str, object] | None, **extra: object) -> Path:
    data: dict[str, object] = {"name": "prep", "sites": [1], **extra}
    if provider is not None:
        data["provider"] = provider
    path.write_text(yaml.safe_dump(data))
    return path


def _static(*hosts: StaticHost) -> dict[str, object]:
    return {"kind": "enoslib", "static": {"hosts": [
        {"address": h.address, "port": h.port, "user": h.user, "key_file": h.key_file} for h in hosts]}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- bad input and unreachable hosts ---------------------------------------------------------

@pytest.mark.parametrize("provider", [None, {"kind": "local"}, {}], ids=["none", "local", "empty"])
def test_a_spec_without_hosts_is_one_line_exit_2(juice: Juice, tmp_path: Path,
                                                  provider: dict[str, object] | None) -> None:
    spec = _spec(tmp_path / "s.yaml", provider)
    code, out, err = juice("hosts", "prepare", str(spec))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "no hosts to prepare" in err, err


def test_bad_input_is_exit_2_naming_the_field(juice: Juice, tmp_path: Path) -> None:
    h = StaticHost(address="127.0.0.1", port=_free_port())
    spec = _spec(tmp_path / "s.yaml", _static(h))
    for args, want in ((["--sites", "2"], "provider.static.hosts: 1 host(s) for 2 sites"),
                       (["--timeout", "0"], "--timeout"), (["--parallel", "0"], "--parallel"),
                       (["--source-dir", str(tmp_path)], "not a git clone")):
        code, _, err = juice("hosts", "prepare", str(spec), *args)
        assert code == 2 and want in err and len(err.strip().splitlines()) == 1, (args, err)
    bad = _spec(tmp_path / "b.yaml", {"kind": "enoslib", "static": {"hosts": [{"address": "x", "port": 0}]}})
    code, _, err = juice("hosts", "prepare", str(bad))
    assert code == 2 and "provider.static.hosts.0.port" in err, err
    g5k = _spec(tmp_path / "g.yaml", {"kind": "enoslib", "g5k": {"cluster": "paravance", "site": "rennes"}},
                sites="many")
    code, _, err = juice("hosts", "prepare", str(g5k))
    assert code == 2 and "--sites" in err, err


def test_an_unreachable_host_is_named_with_the_step_exit_1(juice: Juice, tmp_path: Path) -> None:
    port = _free_port()  # loopback, nobody listens
    spec = _spec(tmp_path / "s.yaml", _static(StaticHost(address="127.0.0.1", port=port)))
    code, out, err = juice("hosts", "prepare", str(spec), "--log-dir", str(tmp_path / "logs"))
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert f"host 1 (root@127.0.0.1:{port}): check failed: unreachable" in last, err
    assert "FAILED at check" in out  # the summary table
    logs = list((tmp_path / "logs").glob("*/host-1.log"))
    assert len(logs) == 1 and "Connection refused" in logs[0].read_text()


def test_dry_run_prints_the_commands_and_contacts_no_host(juice: Juice, tmp_path: Path) -> None:
    h = StaticHost(address="127.0.0.1", port=_free_port(), key_file="/k/id")
    spec = _spec(tmp_path / "s.yaml", _static(h))
    code, out, err = juice("hosts", "prepare", str(spec), "--dry-run", "--timeout", "5")
    assert code == 0, err
    src = str(clone_dir())
    assert f"host 1 (root@127.0.0.1:{h.port}):" in out
    flat = " ".join(out.split())
    assert f"-p {h.port} -l root -i /k/id" in flat and "BatchMode=yes" in flat
    assert f"tar -c -f - --format=gnu -C {src} --no-recursion --null -T - | ssh" in flat
    assert "timeout -k 30 300 bash scripts/setup.sh" in flat and f"JUICE_CACHE={cache_dir()}" in flat


# --- the commands ----------------------------------------------------------------------------

def test_the_commands_quote_the_path_and_bound_the_setup(tmp_path: Path) -> None:
    dest = "/srv/a b'c"
    ctx = prep.Context(source=Path(dest), run_dir=tmp_path, cache=Path("/var/cache/juice"), files=[])
    t = prep.Target(2, StaticHost(address="10.0.0.2", port=2200, user="root", key_file="~/k"))
    argv = ctx.argv(t, prep.setup_command(dest, ctx.cache, 90.5, None))
    assert argv[:4] == ["ssh", "-T", "-o", "BatchMode=yes"]
    assert argv[argv.index("-p") + 1] == "2200" and argv[argv.index("-l") + 1] == "root"
    assert argv[argv.index("-i") + 1] == str(Path("~/k").expanduser())
    assert f"UserKnownHostsFile={tmp_path / 'known_hosts-2'}" in argv
    assert argv[-3:-1] == ["--", "10.0.0.2"]
    words = shlex.split(argv[-1])
    assert words[:2] == ["cd", "--"] and words[2] == dest
    assert words[words.index("timeout"):][:6] == ["timeout", "-k", "30", "91", "bash", "scripts/setup.sh"]
    assert "JUICE_CACHE=/var/cache/juice" in words
    cmd = shlex.split(prep.setup_command(dest, ctx.cache, 60, "echo 'hi'; uname -a"))
    assert cmd[cmd.index("timeout") + 4:][:3] == ["bash", "-c", "echo 'hi'; uname -a"]
    assert shlex.split(prep.untar_command(dest)) == ["mkdir", "-p", "--", dest, "&&", "tar", "-x", "-f", "-",
                                                     "-C", dest, "--no-same-owner"]
    assert prep.tar_argv(Path(dest))[-6:] == ["-C", dest, "--no-recursion", "--null", "-T", "-"]


def test_what_is_sent_is_what_differs() -> None:
    here = {"a": (0o644, 3, 10), "b": (0o755, 4, 11), "c d": (0o644, 1, 12), "e": (0o644, 1, 1)}
    there = prep.parse_stats("644 3 10 a\n644 4 11 b\n644 1 12 c d\nnoise\n644 1 2 e\n")
    assert there["c d"] == (0o644, 1, 12)
    assert prep.to_send(here, there) == ["b", "e"]  # b: mode, e: mtime
    assert prep.to_send(here, {}) == list(here)


def test_the_check_says_what_is_wrong() -> None:
    ok = {"uid": "0", "os": "debian", "tar": "/usr/bin/tar", "bash": "/usr/bin/bash"}
    assert prep.check_problem(ok, "root") is None
    assert "not root" in str(prep.check_problem({**ok, "uid": "1000"}, "deb"))
    assert "not Debian" in str(prep.check_problem({**ok, "os": "fedora"}, "root"))
    assert "tar not found" in str(prep.check_problem({**ok, "tar": "none"}, "root"))
    assert prep.parse_check("motd\nuid=0\nos=debian\n") == {"uid": "0", "os": "debian"}


# --- the pipeline through a stand-in ssh -----------------------------------------------------

FAKE_SSH = f"""#!{sys.executable}
# Stand-in ssh: runs the remote command here, the clone's path mapped to another directory.
import os, sys
cmd = sys.argv[-1]
if cmd.startswith("printf 'uid="):
    print("uid=0\\nos=debian\\ntar=/usr/bin/tar\\nbash=/usr/bin/bash")
    sys.exit(0)
cmd = cmd.replace(os.environ["FAKE_SRC"], os.environ["FAKE_DST"])
os.execvp("sh", ["sh", "-c", cmd])
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, str]]:
    """(a scratch clone with a space and a quote in its path, the "host's" copy of that path,
    the stand-in ssh)."""
    src, dst = tmp_path / "my clone'1", tmp_path / "host" / "my clone'1"
    (src / "scripts").mkdir(parents=True)
    (src / "scripts" / "setup.sh").write_text("echo setup here\n")
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    (src / "run.sh").chmod(0o755)
    (src / "a dir").mkdir()
    (src / "a dir" / "f.txt").write_text("x" * 1000)
    (src / "untracked").write_text("no")
    subprocess.run(["git", "init", "-q", str(src)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(src), "add", "scripts", "run.sh", "a dir"], check=True, timeout=30)
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv("FAKE_SRC", shlex.quote(str(src)))
    monkeypatch.setenv("FAKE_DST", shlex.quote(str(dst)))
    yield src, dst, str(ssh)


def _ctx(src: Path, run: Path, ssh: str, command: str | None, timeout_s: float = 60.0) -> prep.Context:
    return prep.Context(source=src, run_dir=run, cache=Path("/nonexistent-cache"),
                        files=prep.tracked_files(src), setup_timeout_s=timeout_s, command=command, ssh=ssh)


def test_the_copy_sends_what_differs_and_a_second_run_nothing(fake: tuple[Path, Path, str],
                                                              tmp_path: Path) -> None:
    src, dst, ssh = fake
    t = prep.Target(1, StaticHost(address="127.0.0.1", port=9))
    cmd = "pwd; echo JUICE_CACHE=$JUICE_CACHE; ./run.sh; cat 'a dir/f.txt' | wc -c"
    [o] = prep.prepare_all([t], _ctx(src, tmp_path / "r1", ssh, cmd))
    assert o.ok and o.sent == 3, (o, o.tail())
    log = o.log.read_text()
    assert f"{dst}\nJUICE_CACHE=/nonexistent-cache\nrun\n1000\n" in log, log
    assert not (dst / "untracked").exists() and os.access(dst / "run.sh", os.X_OK)
    assert os.stat(dst / "run.sh").st_mtime == int(os.stat(src / "run.sh").st_mtime)
    [o] = prep.prepare_all([t], _ctx(src, tmp_path / "r2", ssh, cmd))
    assert o.ok and o.sent == 0, o
    (src / "a dir" / "f.txt").write_text("y" * 10)
    (src / "run.sh").unlink()  # deleted here, still tracked: not sent, not an error
    [o] = prep.prepare_all([t], _ctx(src, tmp_path / "r3", ssh, "cat 'a dir/f.txt'"))
    assert o.ok and o.sent == 1 and "yyyyyyyyyy" in o.log.read_text(), o.tail()


def test_a_failing_or_slow_setup_names_the_host_and_step(fake: tuple[Path, Path, str],
                                                         tmp_path: Path) -> None:
    src, _, ssh = fake
    hosts = [prep.Target(k, StaticHost(address="127.0.0.1", port=9 + k)) for k in (1, 2)]
    out = prep.prepare_all(hosts, _ctx(src, tmp_path / "r", ssh, "echo oops >&2; exit 3"))
    assert [(o.ok, o.step, o.why) for o in out] == [(False, "command", "exit 3")] * 2
    assert "oops" in out[1].tail() and out[1].log.name == "host-2.log"
    start = time.monotonic()
    [o] = prep.prepare_all(hosts[:1], _ctx(src, tmp_path / "s", ssh, "sleep 60", timeout_s=1.0))
    assert not o.ok and "timed out" in o.why and time.monotonic() - start < 20, o


STOPPER = """
import sys
from pathlib import Path
from juice.lab.provider import StaticHost
from juice.hosts import prepare as prep
src, run, ssh, mark = map(Path, sys.argv[1:5])
ctx = prep.Context(source=src, run_dir=run, cache=Path("/x"), files=prep.tracked_files(src),
                   command=f"echo $$ > {mark}; exec sleep 600", ssh=str(ssh))
try:
    prep.prepare_all([prep.Target(1, StaticHost(address="127.0.0.1", port=9))], ctx)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_ctrl_c_stops_the_processes_it_started(fake: tuple[Path, Path, str], tmp_path: Path) -> None:
    src, _, ssh = fake
    mark, run = tmp_path / "pid", tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-c", STOPPER, str(src), str(run), ssh, str(mark)],
                         stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(300):  # bounded: up to 30 s for the "setup" to start
            if mark.exists() and mark.read_text().strip():
                break
            time.sleep(0.1)
        pid = int(mark.read_text())
        assert Path(f"/proc/{pid}").exists()
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=30) == 130
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "the setup's process outlived Ctrl-C"
    assert sorted(x.name for x in run.iterdir()) == ["host-1.log"]


# --- real: an sshd in a lab site -------------------------------------------------------------

REAL = [*needs_lab,
        pytest.mark.skipif(testhosts.available() is not None, reason=f"test hosts: {testhosts.available()}")]
F = TypeVar("F", bound=Callable[..., None])


def real(f: F) -> F:
    for m in reversed(REAL):
        f = m(f)
    return f


@pytest.fixture(scope="module")
def host1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StaticHost, Path]]:
    tmp = tmp_path_factory.mktemp("prep-hosts")
    with testhosts.test_hosts(1, tmp) as (_lab, hosts):  # the bare image: no Juice there
        yield hosts[0], tmp


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "juice.cli", "hosts", "prepare", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


@real
def test_prepare_copies_a_clone_to_a_host_and_runs_a_command(host1: tuple[StaticHost, Path],
                                                             tmp_path: Path) -> None:
    h, keys = host1
    # here only: the host has its own file system, it sees the clone once it is copied
    src = tmp_path / f"prep-{secrets.token_hex(3)}"
    assert "No such file" in testhosts.ssh(h, keys, f"ls {src} 2>&1 || true")
    try:
        (src / "scripts").mkdir(parents=True)
        (src / "scripts" / "setup.sh").write_text("exit 9\n")
        (src / "marker.txt").write_text("copied over ssh\n")
        subprocess.run(["git", "init", "-q", str(src)], check=True, timeout=30)
        subprocess.run(["git", "-C", str(src), "add", "-A"], check=True, timeout=30)
        spec = _spec(tmp_path / "s.yaml", _static(h))
        args = [str(spec), "--source-dir", str(src), "--log-dir", str(tmp_path / "logs"),
                "--command", "cat marker.txt; uname -a"]
        cp = _cli(*args)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert "copied 2 of 2 files" in " ".join(cp.stderr.split()), cp.stderr
        assert "ok" in cp.stdout and "host 1" in cp.stdout
        [log] = (tmp_path / "logs").glob("*/host-1.log")
        assert "copied over ssh" in log.read_text()
        assert testhosts.ssh(h, keys, f"cat {src}/marker.txt") == "copied over ssh\n"
        cp = _cli(*args)  # again: nothing to send
        assert cp.returncode == 0 and "copied 0 of 2 files" in " ".join(cp.stderr.split()), cp.stderr
        cp = _cli(*args[:-2])  # the real setup.sh of this scratch clone: exit 9
        assert cp.returncode == 1, cp.stdout + cp.stderr
        assert re.search(r"host 1 \(root@127\.0\.0\.1:\d+\): setup\.sh failed: exit 9", cp.stderr), cp.stderr
    finally:
        shutil.rmtree(src, ignore_errors=True)


@real
def test_prepare_runs_setup_sh_on_a_host(tmp_path: Path) -> None:
    """The real thing: scripts/setup.sh of this clone and its verification, on a host prepared
    before (the test hosts' prepared layer, made by the same steps): the copy sends nothing (the
    host's clone is this one), setup.sh keeps every venv (idempotent), verify-setup.sh passes.
    The host has its own disk: nothing here is touched."""
    with testhosts.test_hosts(1, tmp_path / "hosts", prepared=True) as (_lab, [h]):
        spec = _spec(tmp_path / "s.yaml", _static(h))
        start = time.monotonic()
        cp = _cli(str(spec), "--log-dir", str(tmp_path / "logs"), "--timeout", "15", timeout=1200)
        took = time.monotonic() - start
    assert cp.returncode == 0, cp.stdout + cp.stderr
    [log] = (tmp_path / "logs").glob("*/host-1.log")
    text = log.read_text()
    assert "ready: juice" in text and "exit 0" in text, text[-3000:]
    assert "copied 0 of" in " ".join(cp.stderr.split()), cp.stderr  # the prepared host's clone is this one
    print(f"juice hosts prepare (setup.sh, idempotent) took {took:.1f} s")
    assert took < 300, textwrap.shorten(text, 3000)
