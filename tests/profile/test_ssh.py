"""The SSH profiler without a network: its remote sampler runs for real (python3 on this host,
reading this host's /proc), and ``ssh`` is replaced by a FAKE transport, a shell script that
runs the remote command here (ssh itself, with a real sshd, is in
tests/studies/keystone/test_target_run.py). Checked: the table and summary, the stop on
stdin's closing and after max_s, a refused login and a silent host recorded, not raised, and
no process left."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from juice.errors import UserError
from juice.hosts import ssh
from juice.onhost import sampler as onhost
from juice.profile import ssh as ssh_profile
from juice.profile.sampler import Settings
from juice.spec.target import DEFAULT_PROCESSES, SshHost, Target

FAKE_SSH = '#!/bin/sh\n# FAKE ssh: runs the remote command on this host\n' \
           'while [ "$1" != "--" ]; do shift; done\nshift 2\nexec sh -c "$1"\n'


def fake(tmp: Path, body: str = FAKE_SSH) -> str:
    p = tmp / "fake-ssh"
    p.write_text(body)
    p.chmod(0o755)
    return str(p)


def alive(pid: int | None) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes() if pid is not None else b") Z"
    except OSError:
        return False
    return stat.rpartition(b")")[2].split()[0] != b"Z"


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "juice-ssh-profile-test"])
    yield p
    p.kill()
    p.wait(10)


def test_the_remote_sampler_profiles_matching_processes_into_the_table(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    host = SshHost(host="localhost", processes=[r"sleeper=juice-ssh-profile-tes[t]", r"^\S*nomatch-at-all"])
    prof = ssh_profile.SshProfiler([host], tmp_path, 0.2, ssh=fake(tmp_path)).start(wait_s=20)
    (h,) = prof.hosts
    assert h.error is None and h.offset_s is not None and abs(h.offset_s) < 0.05 and h.rtt_s is not None
    time.sleep(1.0)
    t_stop = time.time()
    s = prof.stop()
    assert s["errors"] == 0 and s["table"] == "profile.parquet" and s["components"] == {"sleeper": 1}, s
    (hs,) = s["hosts"]
    assert hs["end"] == "stdin closed" and hs["samples"] >= 4 and hs["site"] == 1
    df = pq.read_table(tmp_path / "profile.parquet").to_pandas()
    assert set(df["component"].astype(str)) == {"sleeper"} and set(df["pid"]) == {sleeper.pid}
    assert set(df["metric"].astype(str)) == {"cpu_user_s", "cpu_system_s", "rss_bytes", "threads", "fds"}
    assert (df[df["metric"] == "rss_bytes"]["value"] > 1e6).all()
    assert t_stop - 1.5 < df["time"].max() < time.time()  # on this clock (the offset is ~0 here)
    assert not alive(h.pid) and not prof.tmp.exists()


def test_the_remote_sampler_stops_by_itself_after_max_s(tmp_path: Path) -> None:
    prof = ssh_profile.SshProfiler([SshHost(host="h")], tmp_path, 0.1, max_s=0.3, ssh=fake(tmp_path)).start()
    time.sleep(1.0)
    assert not alive(prof.hosts[0].pid)
    s = prof.stop()
    assert s["hosts"][0]["end"] == "max_s" and "stopped (max_s)" in s["error_samples"][0]


def test_a_refused_login_is_recorded_not_raised(tmp_path: Path) -> None:
    refused = fake(tmp_path, "#!/bin/sh\necho 'root@h: Permission denied (publickey).' >&2\nexit 255\n")
    msgs: list[str] = []
    prof = ssh_profile.start([SshHost(host="h")], tmp_path, Settings(), msgs.append, ssh=refused)
    assert prof is not None and msgs[0].startswith("resource profile over SSH: 0/1 host(s)")
    s = prof.stop()
    assert s["errors"] >= 1 and "Permission denied (publickey)" in s["hosts"][0]["error"]
    assert s["hosts"][0]["error"].startswith("host 1 (root@h:22): ssh exited (255)")


def test_a_silent_host_is_killed_by_pid_within_the_bound(tmp_path: Path) -> None:
    silent = fake(tmp_path, "#!/bin/sh\ntrap '' HUP TERM\nexec sleep 60 </dev/null\n")
    prof = ssh_profile.SshProfiler([SshHost(host="h")], tmp_path, 1.0, ssh=silent).start(wait_s=0.5)
    pid = prof.hosts[0].pid
    assert alive(pid) and "not sampling after 0.5 s" in (prof.hosts[0].error or "")
    t0 = time.monotonic()
    s = prof.stop()
    assert time.monotonic() - t0 < ssh_profile.STOP_WAIT_S * 2 + 1 and not alive(pid)
    assert any("killed" in e for e in s["error_samples"])


def test_ssh_runs_in_batch_mode_with_a_private_known_hosts_and_the_key() -> None:
    h = SshHost(host="ctl1", port=2222, user="ops", key_file="~/k")
    argv = ssh.ssh_argv(h, Path("/tmp/x/known_hosts-1"), "cmd")
    text = " ".join(argv)
    for opt in ("BatchMode=yes", "StrictHostKeyChecking=accept-new",
                "UserKnownHostsFile=/tmp/x/known_hosts-1",
                "-p 2222 -l ops", f"-i {Path('~/k').expanduser()} -o IdentitiesOnly=yes"):
        assert opt in text
    assert argv[-3:] == ["--", "ctl1", "cmd"]
    script = ssh_profile.remote_script(DEFAULT_PROCESSES, 1.0, 60.0)
    boot = f"python3 -c 'import sys;exec(sys.stdin.buffer.read({len(script)}))'"
    assert ssh.boot_command(script) == boot


def test_check_names_the_unreadable_key_file(tmp_path: Path) -> None:
    t = Target.model_validate({"cloud": "c", "ssh": [{"host": "a"},
                                                    {"host": "b", "key_file": str(tmp_path / "nope")}]})
    with pytest.raises(UserError, match=r"^target\.ssh\.1\.key_file: .*nope: not a readable file"):
        ssh_profile.check(t.ssh or [])


def test_default_patterns_name_the_openstack_processes() -> None:
    """The remote sampler's own naming code, run here on typical command lines."""
    pats = onhost.patterns(list(DEFAULT_PROCESSES))
    cases = {"gunicorn: worker [keystone]": "keystone", "(wsgi:keystone-public) -k start": "keystone",
             "/usr/bin/uwsgi --ini /etc/keystone/keystone-uwsgi-public.ini": "keystone",
             "/usr/bin/python3 /usr/bin/nova-conductor --config-file /etc/nova/nova.conf": "nova-conductor",
             "/usr/sbin/mariadbd --user=mysql": "mariadbd", "postgres: 15/main: checkpointer": "postgres",
             "/usr/lib/erlang/erts-13/bin/beam.smp -- -root /usr/lib/erlang -s rabbit boot": "rabbitmq",
             "/usr/bin/memcached -m 64": "memcached", "gunicorn: master [placement]": "placement",
             "pytest -q tests/studies/keystone/test_target_run.py": None, "": None}
    assert {cmd: onhost.component(pats, cmd) for cmd in cases} == cases
