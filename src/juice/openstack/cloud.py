"""An existing cloud (a spec's ``target:``): what every study's runs against one share —
the admin credentials as the Keystone client takes them, whether the cloud is a published
Juice lab, the drivers' place on this machine, the RTT to an endpoint, the statement-counter
probe of a read-only database URL, and what Juice cannot measure there."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import socket
import statistics
import string
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from juice import paths
from juice.errors import JuiceError, UserError
from juice.load.drivers import LoopbackSites
from juice.openstack.keystone import Credentials as KsCredentials
from juice.openstack.keystone import KeystoneClient, KeystoneError
from juice.spec.target import Credentials

Progress = Callable[[str], None]
TCP_PROBES = 10
PREFIX = "s_juice_"  # every identity resource Juice creates on a cloud
RUN_ALPHABET = string.ascii_lowercase + string.digits
CLEANUP_TIMEOUT_S = 300.0
NOT_MEASURED = {
    "wan": "no WAN spec: the RTT to each endpoint is measured and recorded instead",
    "db_counters": "no database statement counters (%reads/%writes): Juice has no access to the "
                   "cloud's database",
    "resource_profile": "no CPU/memory profile of the cloud's servers: Juice sees only this machine",
    "server_logs": "no server logs: they stay on the cloud",
}


def ks_credentials(c: Credentials) -> KsCredentials:
    return KsCredentials(c.username, c.password, c.project_name, c.user_domain_name, c.project_domain_name)


def juice_lab_of(creds: Credentials) -> str | None:
    """The Juice lab this target is (a clouds.yaml of ``juice keystone up --publish`` whose lab
    runs and publishes this very port), else None."""
    if not creds.juice_lab:
        return None
    import json

    from juice.lab import state

    st = state.load(creds.juice_lab)
    if st is None or not st.workdir:
        return None
    try:
        rec = json.loads((Path(st.workdir) / "keystone.json").read_text())
    except (OSError, ValueError):
        return None
    port = urlsplit(creds.auth_url).port
    published = {s.get("port") for s in rec.get("servers", []) if s.get("kind") == "forwarder"}
    host = urlsplit(creds.auth_url).hostname
    return creds.juice_lab if host in ("127.0.0.1", "localhost") and port in published else None


@contextmanager
def host_sites(progress: Progress) -> Iterator[LoopbackSites]:
    """Drivers on this machine; their job files in a private temp dir removed at the end (and,
    after a crash, by the next juice command: ``paths.sweep_private_tmp``)."""
    workdir = paths.private_tmp("target")
    try:
        yield LoopbackSites(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def tcp_rtt(url: str, n: int = TCP_PROBES, timeout: float = 5.0, gap_s: float = 0.0) -> list[float]:
    """Seconds of ``n`` TCP connects to the URL's host:port (one round trip each; through a
    published lab's loopback forwarder they end at the forwarder: GET /v3 covers the path)."""
    u = urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    out: list[float] = []
    for i in range(n):
        if i:
            time.sleep(gap_s)
        t0 = time.perf_counter()
        try:
            socket.create_connection((u.hostname or "", port), timeout=timeout).close()
        except OSError as e:
            raise UserError(f"target: cannot connect to {u.hostname}:{port} ({e.strerror or e})") from None
        out.append(time.perf_counter() - t0)
    return out


def ms_summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "min_ms": round(min(xs) * 1e3, 3),
            "median_ms": round(statistics.median(xs) * 1e3, 3), "max_ms": round(max(xs) * 1e3, 3)}


def new_run_prefix() -> str:
    """``s_juice_<6 random>`` (drivers append two digits, then ``_<8 random>``)."""
    return PREFIX + "".join(secrets.choice(RUN_ALPHABET) for _ in range(6))


async def cleanup(client: KeystoneClient, creds: Credentials, prefix: str = PREFIX,
                  workers: int = 10) -> dict[str, int]:
    """Delete every user, project, service and role whose name starts with ``prefix`` (a 404
    counts as deleted). Returns the count per kind."""
    from juice.openstack.contexts import admin_cleanup
    from juice.openstack.identity import Driver

    if not prefix.startswith(PREFIX):
        raise UserError(f"--prefix: Juice deletes only its own resources (names starting {PREFIX!r})")
    drv = Driver(client=client, admin=ks_credentials(creds))
    return await admin_cleanup(drv, workers=workers,
                               owns=lambda name: bool(name) and str(name).startswith(prefix))


def cleanup_now(creds: Credentials, url: str, max_rps: float, prefix: str, progress: Progress,
                client: Callable[[str, float | None], KeystoneClient] | None = None) -> dict[str, int]:
    """``cleanup`` from synchronous code, bounded in time; JuiceError when it cannot finish.
    ``client(url, max_rps)`` makes the Keystone client (default: a real one)."""
    async def go() -> dict[str, int]:
        c = (client or (lambda u, r: KeystoneClient(u, max_rps=r)))(url, max_rps)
        try:
            return await asyncio.wait_for(cleanup(c, creds, prefix), CLEANUP_TIMEOUT_S)
        finally:
            await c.close()

    try:
        counts = asyncio.run(go())
    except (TimeoutError, KeystoneError, OSError) as e:
        raise JuiceError(f"cleanup of {prefix}* failed ({e}); run `juice cleanup --target SPEC`") from None
    left = {k: v for k, v in counts.items() if v}
    progress(f"cleanup {prefix}*: " + (f"deleted {', '.join(f'{v} {k}' for k, v in left.items())}"
                                       if left else "nothing was left"))
    return counts
