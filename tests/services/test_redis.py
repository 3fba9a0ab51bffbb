"""Redis: a real server in an ephemeral lab; reached across the WAN; nothing left running."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from juice.errors import ServiceError
from juice.lab import LocalLab, spec
from juice.lab.setns import in_site
from juice.services.caches.redis import Redis, command, parse_info, server_args
from juice.util import proc
from tests.services.conftest import FakeSites, needs_lab


def test_server_args_bind_site_without_persistence() -> None:
    argv = server_args("10.210.2.2", 6380, Path("/w/s2/redis"), 32)
    assert argv[argv.index("--bind") + 1] == "10.210.2.2"
    assert argv[argv.index("--port") + 1] == "6380"
    assert argv[argv.index("--save") + 1] == "" and argv[argv.index("--appendonly") + 1] == "no"
    assert argv[argv.index("--maxmemory") + 1] == "32mb"
    assert argv[argv.index("--logfile") + 1] == ""  # stdout: the log file spawn appends to


def test_parse_info() -> None:
    reply = b"$60\r\n# Server\r\nredis_version:7.0.15\r\nprocess_id:42\r\n\r\n# Memory\r\nused_memory:1\r\n"
    assert parse_info(reply) == {"redis_version": "7.0.15", "process_id": "42", "used_memory": "1"}


def test_rejects_bad_options() -> None:
    with pytest.raises(ServiceError, match="site: 5"):
        Redis(FakeSites(), site=5)  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="maxmemory_mb"):
        Redis(FakeSites(), maxmemory_mb=0)  # type: ignore[arg-type]


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_redis_real(lab_name: str) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2, "delay_ms": 5}), ephemeral=True) as lab:
        rd = Redis(lab, site=1, maxmemory_mb=16)
        try:
            rd.up(timeout=30)
            host, port = rd.address(2).rsplit(":", 1)
            assert host == lab.site_ip(1)
            # A client in site 2 reaches site 1's redis across the WAN: two connections, each a
            # handshake and a request, are four round trips of 10 ms at least (the delayer
            # never releases early), so traffic that bypassed the WAN fails here.
            t0 = time.monotonic()
            reply = in_site(lab.site_ns(2), lambda: command(host, int(port), "SET", "k", "hi")
                            + command(host, int(port), "GET", "k"))
            took = time.monotonic() - t0
            assert reply == b"+OK\r\n$2\r\nhi\r\n"
            assert took >= 0.0395, f"{took * 1000:.1f} ms: less than four 10 ms round trips"
            assert rd.info(2)["maxmemory"] == str(16 * 1024 * 1024)
            assert "Ready to accept connections" in rd.log.read_text()
            # A second server on the same address fails loudly (the first one's answers do not count).
            with pytest.raises(ServiceError, match="redis in site 1"):
                Redis(lab, site=1, maxmemory_mb=16).up(timeout=10)
            pids = [r.pid for r in rd.records()]
            assert len(pids) == 1 and proc.alive(pids[0])
            assert Path(f"/proc/{pids[0]}/comm").read_text().strip() == "redis-server"
        finally:
            rd.stop()
        assert not proc.alive(pids[0])
        assert rd.records() == []
