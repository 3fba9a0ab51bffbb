"""memcached: real servers in an ephemeral lab; stats seen from a site; nothing left running."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from juice.errors import ServiceError
from juice.lab import LocalLab, spec
from juice.lab.setns import in_site
from juice.services.caches.memcached import Memcached, server_args
from juice.util import proc
from tests.services.conftest import FakeSites, needs_lab


def test_server_args_bind_site_and_drop_root() -> None:
    argv = server_args("10.210.2.2", 11311, 32, "memcache")
    assert argv[argv.index("-l") + 1] == "10.210.2.2"
    assert argv[argv.index("-p") + 1] == "11311"
    assert argv[argv.index("-u") + 1] == "memcache"
    assert argv[argv.index("-U") + 1] == "0"


def test_rejects_unknown_site() -> None:
    with pytest.raises(ServiceError, match="sites: 5"):
        Memcached(FakeSites(), sites=[5])  # type: ignore[arg-type]


def _set_get(host: str, port: int) -> bytes:
    with socket.create_connection((host, port), timeout=3) as s:
        s.sendall(b"set k 0 0 2\r\nhi\r\nget k\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        return buf


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_memcached_per_site_real(lab_name: str) -> None:
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2, "delay_ms": 5}), ephemeral=True) as lab:
        mc = Memcached(lab, sites=[1, 2], memory_mb=16)
        try:
            mc.up(timeout=30)
            assert mc.address(2) == f"{lab.site_ip(2)}:11211"
            host, port = mc.address(2).rsplit(":", 1)
            # A client in site 1 reaches site 2's memcached across the WAN: the TCP handshake
            # and the request are two round trips of 10 ms at least (the delayer never releases
            # early; load only adds), so traffic that bypassed the WAN fails here.
            t0 = time.monotonic()
            reply = in_site(lab.site_ns(1), lambda: _set_get(host, int(port)))
            took = time.monotonic() - t0
            assert b"VALUE k 0 2\r\nhi" in reply
            assert took >= 0.0195, f"{took * 1000:.1f} ms: less than two 10 ms round trips"
            st = mc.stats(2)
            assert int(st["curr_items"]) == 1 and int(st["get_hits"]) == 1
            assert int(mc.stats(1)["curr_items"]) == 0
            # A second server on the same address fails loudly (the first one's answers do not count).
            with pytest.raises(ServiceError, match="memcached in site 2"):
                Memcached(lab, sites=[2], memory_mb=16).up(timeout=10)
            pids = [r.pid for r in mc.records()]
            assert len(pids) == 2 and all(proc.alive(p) for p in pids)
            assert all(Path(f"/proc/{p}/comm").read_text().strip() == "memcached" for p in pids)
        finally:
            mc.stop()
        assert not any(proc.alive(p) for p in pids)
        assert mc.records() == []
