"""process.spawn on this host (``lab=None``): pid recorded, early failure, pid file, stop by pid."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from juice.errors import ServiceError
from juice.lab.place import ThisHost
from juice.services.base import wait_for
from juice.services.process import spawn, stop_all
from juice.util import proc

SLEEP = [sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(60)"]


def test_the_spawned_process_is_the_server(tmp_path: Path) -> None:
    srv = spawn(ThisHost(), SLEEP, log=tmp_path / "s.log", what="sleeper in site 0")
    try:
        assert srv.proc is not None and srv.pid == srv.proc.pid and srv.running()
        srv.wait_ready(lambda: "sleeping" in (tmp_path / "s.log").read_text(), 30)
        rec = srv.record("sleeper", port=1, datadir=tmp_path, extra={"k": "v"})
        assert (rec.pid, rec.pid_start) == (srv.pid, proc.start_time(srv.pid))
        assert rec.log == str(tmp_path / "s.log")
        assert rec.extra == {"k": "v"}
    finally:
        srv.stop(grace_s=5)
    assert not srv.running() and srv.proc is None


def test_waiting_stops_when_the_process_exits(tmp_path: Path) -> None:
    srv = spawn(ThisHost(), [sys.executable, "-c", "print('bad option'); raise SystemExit(3)"],
                log=tmp_path / "s.log", what="broken in site 2")
    with pytest.raises(ServiceError, match=r"broken in site 2: exited with code 3 \(log: bad option\)"):
        srv.wait_ready(lambda: False, 60)
    srv.stop()


def test_not_ready_in_time_names_the_server(tmp_path: Path) -> None:
    srv = spawn(ThisHost(), SLEEP, log=tmp_path / "s.log", what="sleeper")
    try:
        with pytest.raises(ServiceError, match="slow check: not ready after"):
            srv.wait_ready(lambda: False, 0.3, "slow check", fail=lambda: None)
        with pytest.raises(ServiceError, match="sleeper: workers crash"):
            srv.wait_ready(lambda: False, 30, fail=lambda: "workers crash")
    finally:
        srv.stop(grace_s=5)


def test_pid_from_the_pid_file(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    pidfile.write_text("1\n")  # stale: removed before the start
    code = ("import os, sys, time\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            "    time.sleep(60)\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    srv = spawn(ThisHost(), [sys.executable, "-c", code], log=tmp_path / "s.log", pidfile=pidfile,
                what="forking server")
    assert srv.pid is None
    try:
        srv.wait_ready(lambda: True, 30)
        assert srv.proc is not None and srv.pid not in (None, 1, srv.proc.pid) and srv.running()
        server = srv.pid
    finally:
        srv.stop(grace_s=5)
    assert server is not None and not proc.alive(server)


def test_a_recycled_pid_is_not_the_server(tmp_path: Path) -> None:
    srv = spawn(ThisHost(), SLEEP, log=tmp_path / "s.log", what="sleeper")
    try:
        assert srv.pid_start is not None
        srv.pid_start += 1  # as if the pid now named another process
        assert not srv.running()
        srv.pid_start -= 1
    finally:
        stop_all([srv], grace_s=5)
    assert srv.pid is not None and not proc.alive(srv.pid)


def test_stop_all_signals_every_server(tmp_path: Path) -> None:
    servers = [spawn(ThisHost(), SLEEP, log=tmp_path / f"s{i}.log", what=f"s{i}") for i in range(3)]
    stop_all(servers, grace_s=5)
    assert not any(s.running() for s in servers)


def test_memory_reads_rss_pss_and_uss_from_smaps_rollup(tmp_path: Path) -> None:
    import os

    from juice.services.process import memory, rss

    srv = spawn(ThisHost(), SLEEP, log=tmp_path / "s.log", what="sleeper in site 0")
    try:
        assert srv.pid is not None
        # compare the two reads once the sleeper is idle: while Python starts, its RSS grows by
        # megabytes between them (seen once on a loaded machine: 1.3 MB, then 8.9 MB)
        wait_for(lambda: "sleeping" in (tmp_path / "s.log").read_text(), 30, "the sleeper to start")
        gone = 2**22 + 1  # above the kernel's pid_max: never a process
        got = memory(ThisHost(), [os.getpid(), srv.pid, gone])
        assert set(got) == {os.getpid(), srv.pid}
        for m in got.values():
            assert 0 < m["uss"] <= m["rss"] and m["uss"] <= m["pss"] <= m["rss"]
        # the same RSS as /proc/<pid>/status, within what the sleeper does between the reads
        assert abs(got[srv.pid]["rss"] - rss(ThisHost(), [srv.pid])[srv.pid]) < 4 << 20
        assert memory(ThisHost(), []) == {}
    finally:
        srv.stop(grace_s=5)
