"""ssh as Juice uses it: one command line for every connection to a host (a key, never a
prompt, host keys accepted on first use into a per-lab known_hosts), the host key's
fingerprint for the manifest, and the boot command that starts a Python program sent over
the connection (the host agent, the SSH profiler)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

CONNECT_TIMEOUT_S = 10


def boot_command(script: bytes) -> str:
    """The remote command: python3 reading exactly the script from stdin (quoted for any shell)."""
    return f"python3 -c 'import sys;exec(sys.stdin.buffer.read({len(script)}))'"


def ssh_argv(h: Any, known_hosts: Path, command: str, ssh: str = "ssh", *, address: str | None = None,
             connect_timeout: int = CONNECT_TIMEOUT_S, alive_count_max: int = 3) -> list[str]:
    """ssh to ``h`` (port, user, key_file; ``address`` or ``h.host``): a key, never a prompt,
    host keys accepted on first use into ``known_hosts``."""
    argv = [ssh, "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "HashKnownHosts=no",
            "-o", f"ConnectTimeout={connect_timeout}", "-o", "ServerAliveInterval=10",
            "-o", f"ServerAliveCountMax={alive_count_max}", "-o", "ControlPath=none", "-o", "LogLevel=ERROR",
            "-p", str(h.port), "-l", h.user]
    if h.key_file:
        argv += ["-i", str(Path(h.key_file).expanduser()), "-o", "IdentitiesOnly=yes"]
    return [*argv, "--", address if address is not None else h.host, command]


def fingerprint(known_hosts: Path) -> str | None:
    """SHA256 fingerprint (as ``ssh-keygen -l``) of the first key in a known_hosts file."""
    try:
        line = known_hosts.read_text().split("\n")[0].split()
        return f"{line[1]} SHA256:" + base64.b64encode(
            hashlib.sha256(base64.b64decode(line[2])).digest()).decode().rstrip("=")
    except (OSError, IndexError, ValueError):
        return None
