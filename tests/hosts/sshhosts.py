"""Test hosts on one machine: an sshd inside each site namespace of a local lab (the 'physical'
network, 0 ms), each in its own mount namespace with a private tmpfs on /var/tmp/juice-host,
so that what Juice puts on a host is NOT visible from here (it must travel through ssh), and
reached from here through a loopback forwarder (the 'control network').

    with ssh_hosts(3, tmp) as (lab, hosts):      # hosts: provider.StaticHost, site k = hosts[k-1]
        ...
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from juice.hosts.agent import BASE
from juice.lab import LocalLab
from juice.lab.local import uniform_lab
from juice.lab.provider import StaticHost

SSHD = Path("/usr/sbin/sshd")
# who uses BASE now (flock: shared per user); in the cache, which outlives test runs
USERS_LOCK = Path(os.environ.get("JUICE_CACHE", "/var/cache/juice")) / "test-hosts.lock"
SSHD_PORT = 2222


def keys(tmp: Path) -> None:
    for key in ("host", "client"):
        if not (tmp / key).exists():
            subprocess.run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    f"juice-test-{key}",
                    "-f",
                    str(tmp / key),
                ],
                check=True,
                timeout=30,
            )
    (tmp / "authorized_keys").write_text((tmp / "client.pub").read_text())


def plain_ssh(h: StaticHost, tmp: Path, command: str) -> str:
    """One command on a test host by plain ssh (what a user would check by hand)."""
    cp = subprocess.run(
        [
            "ssh",
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            f"UserKnownHostsFile={tmp / 'known_hosts'}",
            "-o",
            "LogLevel=ERROR",
            "-p",
            str(h.port),
            "-l",
            h.user,
            "-i",
            str(h.key_file),
            h.address,
            command,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


@contextmanager
def ssh_hosts(
    n: int, tmp: Path, progress: Any = lambda _: None
) -> Iterator[tuple[LocalLab, list[StaticHost]]]:
    from juice.services.openstack.keystone_publish import start_forwarder
    from juice.services.process import port_open, spawn

    tmp.mkdir(parents=True, exist_ok=True)
    keys(tmp)
    # the mount point of each host's tmpfs, shared by every test's hosts on this machine (in
    # other pytest workers too): held with a shared lock, removed by whoever leaves it last
    # (removing it would detach the private mounts of hosts still running elsewhere)
    users = open(USERS_LOCK, "a+")  # noqa: SIM115 (held for the block's life)
    fcntl.flock(users, fcntl.LOCK_SH)
    Path(BASE).mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    with ExitStack() as stack:
        stack.callback(_leave, users)
        lab = stack.enter_context(uniform_lab("ssh", n, 0.0, progress))
        hosts = []
        for k in lab.sites:
            conf = tmp / f"sshd-{k}.conf"
            conf.write_text(
                f"Port {SSHD_PORT}\nListenAddress {lab.site_ip(k)}\nHostKey {tmp / 'host'}\n"
                f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPidFile none\nUsePAM no\n"
                "StrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
            )
            script = f"mount -t tmpfs juice-host {BASE} && exec {SSHD} -D -e -f {conf}"
            srv = spawn(
                lab.place(k),
                ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                log=tmp / f"sshd-{k}.log",
                what=f"sshd in site {k}",
            )
            stack.callback(srv.stop, 5.0)
            srv.wait_ready(lambda k=k: port_open(lab.place(k), lab.site_ip(k), SSHD_PORT), timeout=30)  # type: ignore[misc]
            fwd, port = start_forwarder(lab, k, SSHD_PORT, tmp)
            stack.callback(fwd.stop, 2.0)
            hosts.append(
                StaticHost(
                    address="127.0.0.1",
                    port=port,
                    user="root",
                    key_file=str(tmp / "client"),
                    wan_address=lab.site_ip(k),
                )
            )
        yield lab, hosts


def _leave(users: Any) -> None:
    """Release the shared hold on the mount point; the last user removes it (empty)."""
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # hosts of another test still use it
        pass
    else:
        try:
            os.rmdir(BASE)
        except OSError:
            pass
    finally:
        users.close()
