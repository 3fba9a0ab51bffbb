"""`juice hosts prepare --offline` (juice.hosts.offline, scripts/offline-bundle.sh, setup.sh's
JUICE_OFFLINE, scripts/verify-setup.sh).

- Fast (no root): the bundle's INFO and file list, the commands as built, and the pipeline with
  a bundle through a stand-in ssh (paths mapped to "another machine"): the bundle is sent
  (files, bytes), a second run sends nothing, setup gets JUICE_OFFLINE, verify runs after it and
  its failure is named; every step timed.
- Slow (root, ~10 min): a BARE Debian 12 host (scripts/bare.sh's debootstrap image, nothing else:
  no Python, no /var/cache/juice) with its own sshd in a network namespace holding only `lo`
  (no route, no DNS: any registry access fails), prepared from this clone with
  `juice hosts prepare --offline`, then checked over ssh. By hand:
      JUICE_TEST_OFFLINE_BARE=1 nice pytest -q -s tests/hosts/test_prepare_offline.py -k bare
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from juice.cli.hosts import clone_dir
from juice.hosts import offline as offl
from juice.hosts import prepare as prep
from juice.lab.provider import StaticHost
from tests.conftest import Juice

# --- pure -------------------------------------------------------------------------------------


def test_info_and_the_bundle_files_leave_out_what_the_host_writes(tmp_path: Path) -> None:
    info = offl.parse_info("made=2026-11-27T17:08:02Z seconds=163 digest=fa8a arch=amd64\n"
                           "wheels=272 wheels_mb=265\ndebs=138 debs_mb=198\napt=gcc python3-dev\n")
    assert info["wheels"] == "272" and info["debs_mb"] == "198" and info["apt"] == "gcc python3-dev"
    with pytest.raises(Exception, match="not a finished bundle"):
        offl.load_bundle(tmp_path)
    for f in ("wheels/a.whl", "debs/b.deb", "debs/Packages", "bin/juice-wan-delay", "apt/lists/x",
              "SHA256SUMS", "INFO"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x" * 10)
    b = offl.load_bundle(tmp_path)
    assert b.files == ["INFO", "SHA256SUMS", "bin/juice-wan-delay", "debs/Packages", "debs/b.deb",
                       "wheels/a.whl"]  # apt/ (the host's lists of the flat repository) never sent
    assert b.bytes == 60


def test_the_commands_carry_the_bundle_path(tmp_path: Path) -> None:
    cmd = shlex.split(prep.setup_command("/srv/j", Path("/c"), 60, None, "/c/offline/ab cd"))
    assert "JUICE_OFFLINE=/c/offline/ab cd" in cmd and "JUICE_CACHE=/c" in cmd
    assert "JUICE_OFFLINE" not in prep.setup_command("/srv/j", Path("/c"), 60, None)
    v = shlex.split(prep.verify_command("/srv/j", Path("/c"), "/c/offline/x"))
    assert v[:3] == ["cd", "--", "/srv/j"] and "JUICE_OFFLINE=/c/offline/x" in v
    assert v[-3:] == ["bash", "scripts/verify-setup.sh", "</dev/null"]


def test_setup_phases_from_its_log_lines() -> None:
    text = ("\x1b[1m[setup +0s]\x1b[0m offline: checking the bundle /b (413 files)\nnoise\n"
            "\x1b[1m[setup +2s]\x1b[0m installing Debian packages: gcc python3-dev\n"
            "[setup +97s] creating the venv /c/venv (scripts/lock/juice.txt)\n"
            "[setup +130s] ready: juice 0.1\n")
    assert prep.setup_phases(text) == [("offline", 2.0), ("installing Debian packages", 95.0),
                                       ("creating the venv /c/venv", 33.0)]
    assert prep.setup_phases("no marks\n") == []


def test_offline_the_check_wants_debian_12_of_the_bundles_architecture() -> None:
    ok = {"uid": "0", "os": "debian", "tar": "/usr/bin/tar", "bash": "/usr/bin/bash", "version": "12",
          "arch": "amd64"}
    assert prep.check_problem(ok, "root", "amd64") is None
    assert "not 12" in str(prep.check_problem({**ok, "version": "13"}, "root", "amd64"))
    assert prep.check_problem({**ok, "version": "13"}, "root") is None  # online: setup.sh decides
    assert "architecture arm64" in str(prep.check_problem({**ok, "arch": "arm64"}, "root", "amd64"))
    facts = prep.parse_check(subprocess.run(["sh", "-c", prep.CHECK], capture_output=True, text=True,
                                            timeout=30, check=True).stdout)
    assert set(facts) == {"uid", "os", "tar", "bash", "version", "arch"} and facts["arch"] != "unknown"


# --- the pipeline through a stand-in ssh -----------------------------------------------------

FAKE_SSH = f"""#!{sys.executable}
# Stand-in ssh: runs the remote command here, each mapped path replaced by the "host's" one.
import json, os, sys
cmd = sys.argv[-1]
if cmd.startswith("printf 'uid="):
    print("uid=0\\nos=debian\\ntar=/usr/bin/tar\\nbash=/usr/bin/bash")
    sys.exit(0)
for a, b in json.loads(os.environ["FAKE_MAP"]):
    cmd = cmd.replace(a, b)
os.execvp("sh", ["sh", "-c", cmd])
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[prep.Context, Path, Path]]:
    """(a context with a scratch clone and a scratch bundle, the host's clone, the host's bundle)."""
    import json

    src, bundle = tmp_path / "clone", tmp_path / "cache" / "offline" / "d1"
    host = tmp_path / "host"
    (src / "scripts").mkdir(parents=True)
    (src / "scripts" / "setup.sh").write_text('echo "setup JUICE_OFFLINE=$JUICE_OFFLINE"\n')
    (src / "scripts" / "verify-setup.sh").write_text(
        'echo "verify: JUICE_OFFLINE=$JUICE_OFFLINE"; [ -f "$JUICE_OFFLINE/wheels/a.whl" ] '
        '|| { echo "verify: FAILED: no wheel"; exit 1; }\n')
    subprocess.run(["git", "init", "-q", str(src)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(src), "add", "scripts"], check=True, timeout=30)
    for f, size in (("wheels/a.whl", 3000), ("debs/b.deb", 2000), ("bin/juice-wan-delay", 500),
                    ("SHA256SUMS", 10), ("INFO", 10)):
        (bundle / f).parent.mkdir(parents=True, exist_ok=True)
        (bundle / f).write_bytes(b"x" * size)
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    hsrc, hbundle = host / "clone", host / "bundle"
    monkeypatch.setenv("FAKE_MAP", json.dumps([[shlex.quote(str(src)), shlex.quote(str(hsrc))],
                                               [shlex.quote(str(bundle)), shlex.quote(str(hbundle))]]))
    ctx = prep.Context(source=src, run_dir=tmp_path / "run", cache=tmp_path / "cache",
                       files=prep.tracked_files(src), ssh=str(ssh), bundle=offl.load_bundle(bundle))
    yield ctx, hsrc, hbundle


def test_the_bundle_is_sent_then_setup_offline_then_verify(fake: tuple[prep.Context, Path, Path]) -> None:
    ctx, hsrc, hbundle = fake
    t = prep.Target(1, StaticHost(address="127.0.0.1", port=9))
    [o] = prep.prepare_all([t], ctx)
    assert o.ok, (o, o.tail())
    assert list(o.steps) == ["check", "copy", "bundle", "setup.sh", "verify"]
    assert o.copied["clone"] == prep.Copied(2, 2, o.copied["clone"].bytes)
    assert o.copied["bundle"] == prep.Copied(5, 5, 5520)
    assert (hbundle / "wheels" / "a.whl").stat().st_size == 3000
    log = o.log.read_text()
    assert f"setup JUICE_OFFLINE={hbundle}" in log and f"verify: JUICE_OFFLINE={hbundle}" in log
    assert "bundle 5 of 5 files (0.0 MB)" in o.copy_summary() and "verify " in o.step_summary()
    ctx.run_dir = ctx.run_dir.parent / "run2"
    [o] = prep.prepare_all([t], ctx)  # again: nothing to send
    assert o.ok and o.copied["bundle"] == prep.Copied(0, 5, 0) and o.copied["clone"].sent == 0
    (hbundle / "wheels" / "a.whl").unlink()  # gone on the host: sent again, alone
    ctx.run_dir = ctx.run_dir.parent / "run3"
    [o] = prep.prepare_all([t], ctx)
    assert o.ok and o.copied["bundle"] == prep.Copied(1, 5, 3000), o
    assert hsrc.is_dir()


def test_a_failed_verify_is_named(fake: tuple[prep.Context, Path, Path]) -> None:
    ctx, hsrc, _ = fake
    (ctx.source / "scripts" / "setup.sh").write_text('rm -f "$JUICE_OFFLINE/wheels/a.whl"\n')
    t = prep.Target(2, StaticHost(address="127.0.0.1", port=9))
    [o] = prep.prepare_all([t], ctx)
    assert (o.ok, o.step, o.why) == (False, "verify", "no wheel"), o.tail()
    assert list(o.steps) == ["check", "copy", "bundle", "setup.sh", "verify"]


def test_dry_run_offline_prints_the_bundle_steps(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "p", "sites": [1], "provider": {
        "kind": "enoslib", "static": {"hosts": [{"address": "10.0.0.9", "port": 22}]}}}))
    cp = subprocess.run([sys.executable, "-m", "juice.cli", "hosts", "prepare", str(spec), "--offline",
                         "--dry-run"], capture_output=True, text=True, timeout=120, check=False,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    flat = " ".join(cp.stdout.split())
    assert "scripts/offline-bundle.sh" in flat and "bundle, send: tar -c" in flat
    assert "JUICE_OFFLINE=" in flat and "/offline/<digest>" in flat
    assert "verify: ssh" in flat and "scripts/verify-setup.sh" in flat


def test_a_bundle_given_must_be_one(juice: Juice, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "p", "sites": [1], "provider": {
        "kind": "enoslib", "static": {"hosts": [{"address": "127.0.0.1", "port": 9}]}}}))
    code, _, err = juice("hosts", "prepare", str(spec), "--bundle", str(tmp_path), "--log-dir",
                         str(tmp_path / "l"))
    assert code == 2 and "--bundle: " in err and "not a finished bundle" in err, err
    assert len(err.strip().splitlines()) == 1, err


# --- slow: a bare Debian 12 host without any network ------------------------------------------

BARE = clone_dir() / "scripts" / "bare.sh"
PORT = 2222
# In the bare overlay (PID 1 of its own PID namespace: when it ends, everything it started
# ends): the client's key from stdin, sshd on the namespace's loopback, until stdin closes.
HOST_SCRIPT = r"""
set -e
read -r key
mkdir -p /root/.ssh /run/sshd && chmod 700 /root/.ssh
printf '%s\n' "$key" > /root/.ssh/authorized_keys
/usr/sbin/sshd -D -e -p {port} -o ListenAddress=127.0.0.1 -o PermitRootLogin=prohibit-password &
echo "bare host: sshd $!, python3: $(command -v python3 || echo none)," \
  "/var/cache/juice: $(ls -d /var/cache/juice 2>/dev/null || echo none)"
cat >/dev/null
kill $! 2>/dev/null || true
"""


@contextmanager
def bare_offline_host(tmp: Path) -> Iterator[tuple[StaticHost, Path, str]]:
    """A bare Debian 12 host (scripts/bare.sh run: a throwaway overlay of the debootstrap image) in
    a new network namespace with only `lo`, its sshd on 127.0.0.1:PORT there; (the host, a PATH
    dir whose `ssh` enters that namespace first, the namespace's name). Everything is gone after."""
    ns = f"juice-offl-{os.getpid()}"
    key = tmp / "id"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(f"#!/bin/sh\nexec ip netns exec {ns} /usr/bin/ssh \"$@\"\n")
    (bindir / "ssh").chmod(0o755)
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    log = (tmp / "bare.log").open("wb")
    p: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True, timeout=30)
        p = subprocess.Popen(["ip", "netns", "exec", ns, "bash", str(BARE), "run", "--", "bash", "-c",
                              HOST_SCRIPT.replace("{port}", str(PORT))],
                             stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True)
        assert p.stdin is not None
        p.stdin.write((tmp / "id.pub").read_bytes())
        p.stdin.flush()
        h = StaticHost(address="127.0.0.1", port=PORT, user="root", key_file=str(key))
        probe = [str(bindir / "ssh"), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                 "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-i", str(key), "-p", str(PORT),
                 "root@127.0.0.1", "true"]
        for _ in range(600):  # bounded: up to 10 min (the image may be made first: ~2 min)
            if p.poll() is not None:
                raise AssertionError(f"the bare host ended: {(tmp / 'bare.log').read_text()[-2000:]}")
            if subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0:
                break
            time.sleep(1)
        else:
            raise AssertionError(f"no sshd on the bare host: {(tmp / 'bare.log').read_text()[-2000:]}")
        yield h, bindir, ns
    finally:
        if p is not None:
            if p.stdin is not None:
                p.stdin.close()  # the host's script ends: its PID namespace with it
            try:
                p.wait(timeout=600)  # bare.sh removes the overlay (~1.5 GB installed): minutes
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
        log.close()
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)


def _host(bindir: Path, h: StaticHost, command: str) -> str:
    cp = subprocess.run([str(bindir / "ssh"), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-i", str(h.key_file),
                         "-p", str(h.port), "root@127.0.0.1", command],
                        capture_output=True, text=True, timeout=120, check=False)
    return cp.stdout + cp.stderr


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or (shutil.which("debootstrap") is None and not
                    (Path(os.environ.get("JUICE_CACHE", "/var/cache/juice")) / "bare" / "bookworm").is_dir()),
                    reason="needs root and scripts/bare.sh's image (or debootstrap)")
@pytest.mark.skipif(os.environ.get("JUICE_TEST_OFFLINE_BARE") != "1",
                    reason="[optional] opt-in: 5-9 min on a bare host, beyond the suite's 12 minutes; "
                    "JUICE_TEST_OFFLINE_BARE=1 runs it (docs/multi-host.md)")
def test_prepare_offline_on_a_bare_host_without_network(tmp_path: Path) -> None:
    with bare_offline_host(tmp_path) as (h, bindir, ns):
        assert "python3: none" in (tmp_path / "bare.log").read_text()  # bare indeed
        links = subprocess.run(["ip", "-n", ns, "-o", "link"], capture_output=True, text=True, timeout=30,
                               check=True).stdout
        routes = subprocess.run(["ip", "-n", ns, "route"], capture_output=True, text=True, timeout=30,
                                check=True).stdout
        assert [x.split(":")[1].strip() for x in links.splitlines()] == ["lo"] and not routes.strip()
        assert "unreachable" in _host(bindir, h, "ping -c1 -W2 deb.debian.org 2>&1 || "
                                      "echo unreachable")
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump({"name": "offline", "sites": [1], "provider": {
            "kind": "enoslib", "static": {"hosts": [{"address": h.address, "port": h.port, "user": "root",
                                                     "key_file": h.key_file}]}}}))
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
        start = time.monotonic()
        cp = subprocess.run([sys.executable, "-m", "juice.cli", "hosts", "prepare", str(spec), "--offline",
                             "--log-dir", str(tmp_path / "logs"), "--timeout", "40"],
                            capture_output=True, text=True, timeout=3600, check=False, env=env,
                            stdin=subprocess.DEVNULL)
        took = time.monotonic() - start
        print(cp.stdout)
        print(cp.stderr[-4000:])
        [log] = (tmp_path / "logs").glob("*/host-1.log")
        text = log.read_text()
        assert cp.returncode == 0, text[-6000:]
        assert "verify: all ok" in text and "ready: juice" in text, text[-3000:]
        assert "offline: checking the bundle" in text
        # on the host: every venv, the helper, and still no route
        there = _host(bindir, h, "JUICE_CACHE=/var/cache/juice bash " + shlex.quote(str(clone_dir())) +
                      "/scripts/verify-setup.sh; /var/cache/juice/venv/bin/juice --version; "
                      "ip route | wc -l; ls /var/cache/juice/uv-cache >/dev/null && echo uv-cache")
        assert "verify: all ok" in there and "juice" in there, there
        print(f"offline prepare of a bare host: {took:.0f} s\n{there}")
        # a second run sends no bundle file (the clone: what others changed meanwhile in a shared
        # tree) and keeps every venv
        start = time.monotonic()
        cp = subprocess.run([sys.executable, "-m", "juice.cli", "hosts", "prepare", str(spec), "--offline",
                             "--log-dir", str(tmp_path / "logs2")], capture_output=True, text=True,
                            timeout=1800, check=False, env=env, stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, cp.stderr[-3000:]
        flat = " ".join(cp.stderr.split())
        [log2] = (tmp_path / "logs2").glob("*/host-1.log")
        assert "bundle 0 of" in flat and "creating the venv" not in log2.read_text(), flat[-2000:]
        assert time.monotonic() - start < 120, flat[-2000:]
