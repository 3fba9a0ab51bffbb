"""The place protocol (``juice.lab.place``): the same checks on both kinds of place, a site's
network namespace here (``NetnsPlace``) and an SSH host through its agent (``HostPlace``; the
hosts are separate test hosts in the sites of a local lab, tests/testhosts.py: each its own root
filesystem prepared by ``juice hosts prepare``, processes and sshd, so what a host place writes
or starts is not visible here). Then the same MariaDB service on both, and the
partition of a site on hosts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from juice.errors import LabError
from juice.lab import spec as labspec
from juice.lab.local import uniform_lab
from juice.lab.place import Place
from juice.lab.remote import RemoteLab
from tests import testhosts
from tests.services.conftest import needs_lab

pytestmark = [
    *needs_lab,
    pytest.mark.skipif(testhosts.available() is not None, reason=f"test hosts: {testhosts.available()}"),
]
# the test hosts' clocks are this machine's (no libfaketime): redis-server aborts under
# libfaketime 0.9.10 (tests/testhosts.py); shifted clocks are tested in tests/hosts/test_clocks.py
OFFSETS = [None, None]
SLEEPER = "import sys, time; print('up', flush=True); time.sleep(120)"


@pytest.fixture(scope="module", params=["namespace", "ssh-host"])
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A 2-site lab of either kind (the module's tests run once per kind)."""
    if request.param == "namespace":
        with uniform_lab("pl", 2, 0.0) as local:
            yield local
        return
    with testhosts.test_hosts(2, tmp_path_factory.mktemp("hosts"), OFFSETS, prepared=True) as (_lab, hosts), \
            RemoteLab.up(labspec.parse({"name": "pl", "sites": 2, "delay_ms": 0}), hosts) as remote:
        yield remote


def test_files_commands_and_fetch(lab: object, tmp_path: Path) -> None:
    place: Place = lab.place(2)  # type: ignore[attr-defined]
    home = place.root / "s2" / "t"
    place.mkdir(home / "sub")
    place.write(home / "sub" / "a.conf", "x = 1\n", mode=0o600)
    assert place.read(home / "sub" / "a.conf") == b"x = 1\n"
    assert place.read(home / "missing") is None
    r = place.run(["stat", "-c", "%a", str(home / "sub" / "a.conf")])
    assert r.ok and r.out.strip() == "600"
    r = place.run(["sh", "-c", "echo $JUICE_X; cat; exit 3"], input="in", env={"JUICE_X": "y"})
    assert (r.rc, r.out) == (3, "y\nin")
    assert place.fetch(home / "sub" / "a.conf", tmp_path / "got.conf")
    assert (tmp_path / "got.conf").read_text() == "x = 1\n"
    place.remove(home)
    assert place.read(home / "sub" / "a.conf") is None


def test_the_address_is_the_sites_own(lab: object) -> None:
    for site in (1, 2):
        place: Place = lab.place(site)  # type: ignore[attr-defined]
        r = place.run(["ip", "-o", "-4", "addr", "show"])
        assert r.ok and f" {place.address}/" in r.out and place.site == site


def test_start_wait_probe_and_stop_by_recorded_pid(lab: object) -> None:
    from juice.services.process import spawn

    place: Place = lab.place(1)  # type: ignore[attr-defined]
    home = place.root / "s1" / "srv"
    place.mkdir(home)
    srv = spawn(place, [sys.executable, "-m", "http.server", "--bind", place.address, "8099"],
                log=home / "http.log", what="http.server in site 1")
    try:
        other: Place = lab.place(2)  # type: ignore[attr-defined]
        srv.wait_ready(lambda: other.tcp_open(place.address, 8099), timeout=30)
        status, _ = other.http(f"http://{place.address}:8099/")
        assert status == 200 and srv.running() and srv.pid is not None
    finally:
        srv.stop(grace_s=5)
    assert not srv.running() and not place.alive((srv.pid, srv.pid_start))
    assert not lab.place(2).tcp_open(place.address, 8099)  # type: ignore[attr-defined]


def test_a_server_that_exits_fails_the_wait_with_its_log(lab: object) -> None:
    from juice.errors import ServiceError
    from juice.services.process import spawn

    place: Place = lab.place(1)  # type: ignore[attr-defined]
    place.mkdir(place.root / "s1")
    srv = spawn(place, [sys.executable, "-c", "print('bad option'); raise SystemExit(3)"],
                log=place.root / "s1" / "bad.log", what="bad in site 1")
    with pytest.raises(ServiceError, match=r"bad in site 1: exited with code 3 .*bad option"):
        srv.wait_ready(lambda: False, timeout=30)


def test_mariadb_is_the_same_service_at_either_place(lab: object) -> None:
    from juice.services.databases.mariadb import MariaDBCentral

    db = MariaDBCentral(lab, site=2)  # type: ignore[arg-type]
    try:
        db.up(timeout=120)
        assert db.server.query("SELECT CURRENT_USER()") == [("root@localhost",)]
        # a client in the other site reaches it across the lab network, as Juice's user
        other: Place = lab.place(1)  # type: ignore[attr-defined]
        ep = db.endpoint(1).write
        r = other.run(["/usr/bin/mariadb", "-h", ep.host, "-u", ep.user, "-N", "-B", "-e", "SELECT 41 + 1"],
                      env={"MYSQL_PWD": ep.password})
        assert r.ok and r.out.strip() == "42", r
    finally:
        db.stop()
    assert db.server.process is None


def test_memcached_and_redis_are_the_same_services_at_either_place(lab: object) -> None:
    from juice.services.caches.memcached import Memcached
    from juice.services.caches.redis import Redis

    mc = Memcached(lab, sites=[2])  # type: ignore[arg-type]
    rd = Redis(lab, site=2, maxmemory_mb=16)  # type: ignore[arg-type]
    try:
        mc.up(timeout=60)
        rd.up(timeout=60)
        # asked from the other site, across the lab network: our servers (their pids)
        assert mc.stats(1)["pid"] == str(mc.servers[2].pid)
        assert rd.info(1)["process_id"] == str(rd.server.pid if rd.server else None)
    finally:
        mc.stop()
        rd.stop()
    assert not mc.servers and rd.server is None


def test_the_buses_are_the_same_services_at_either_place(lab: object) -> None:
    from juice.services.buses.nats import Nats
    from juice.services.buses.rabbitmq import RabbitMQ

    nats = Nats(lab, sites=[1, 2], topology="gateways")  # type: ignore[arg-type]
    mq = RabbitMQ(lab, nodes=[2])  # type: ignore[arg-type]
    try:
        nats.up(timeout=60)
        mq.up(timeout=120)
        assert [c["gateways_out"] for c in nats.counters()] == [["s2"], ["s1"]]
        assert mq.cluster_nodes(mq.nodes[0]) == [mq.nodes[0].name]
    finally:
        nats.stop()
        mq.stop()
    assert not nats.servers and not mq.servers


def test_keystone_placement_and_the_fakes_are_the_same_services_at_either_place(lab: object) -> None:
    """MariaDB and Keystone in site 1, placement in site 2, the fake-glance/neutron stand-ins
    in site 1: the catalog and the APIs answer from the other site, every process is stopped by
    its recorded pid (workers included) and none is left. nova's own services run on both kinds
    of place in tests/services/test_nova.py (namespaces) and tests/studies/nova/test_hosts.py
    (SSH hosts: the study, boots, logs fetched and traced)."""
    from juice.services.databases.mariadb import MariaDBCentral
    from juice.services.openstack.fake_openstack import IMAGE_ID, FakeServices
    from juice.services.openstack.keystone import Keystone, KeystoneOptions
    from juice.services.openstack.placement import Placement
    from juice.services.process import children

    db = MariaDBCentral(lab, site=1)  # type: ignore[arg-type]
    ks = Keystone(lab, db, options=KeystoneOptions(cache=False, password_hash_rounds=4,  # type: ignore[arg-type]
                                                   sites=(1,), prewarm=False))
    pl = Placement(lab, db, ks, site=2, workers=1)  # type: ignore[arg-type]
    fakes = FakeServices(lab, ks, site=1)  # type: ignore[arg-type]
    stack = [db, ks, pl, fakes]
    refs: list[tuple[Place, tuple[int, int | None]]] = []
    try:
        db.up(timeout=120)
        ks.up(timeout=300)
        pl.up(timeout=300)
        assert pl.resource_providers(site=1) == []  # through the API, from the other site
        status, _ = lab.place(1).http(pl.url() + "/")  # type: ignore[attr-defined]
        assert status == 200
        fakes.up(timeout=60)
        status, body = lab.place(2).http(f"http://{lab.site_ip(1)}:9292/v2/images/{IMAGE_ID}")  # type: ignore[attr-defined]
        assert status == 200 and IMAGE_ID in body
        assert ("GET", f"/v2/images/{IMAGE_ID}", 200) in fakes.requests("glance")
    finally:
        for srv in ([pl.server] if pl.server else []) + [*ks.servers.values(), *fakes.servers.values()]:
            if srv.pid is not None:
                refs += [(srv.place, (srv.pid, srv.pid_start))]
                refs += [(srv.place, (w, None)) for w in children(srv.place, srv.pid)]
        for svc in reversed(stack):
            svc.stop()
    assert pl.server is None and not ks.servers and not fakes.servers
    assert refs and not [ref for place, ref in refs if place.alive(ref)]


def test_paths_outside_the_lab_directory_are_refused_on_hosts(lab: object) -> None:
    place: Place = lab.place(1)  # type: ignore[attr-defined]
    if place.shared_disk:
        return  # this machine's places write where Juice tells them (its own directories)
    with pytest.raises(LabError, match="outside the lab's directory"):
        place.write(Path("/etc/juice-test"), "no")


def test_partition_and_heal(lab: object) -> None:
    one: Place = lab.place(1)  # type: ignore[attr-defined]
    two: Place = lab.place(2)  # type: ignore[attr-defined]
    one.mkdir(one.root / "s1")
    from juice.services.process import spawn

    srv = spawn(one, [sys.executable, "-m", "http.server", "--bind", one.address, "8098"],
                log=one.root / "s1" / "p.log", what="http.server in site 1")
    try:
        srv.wait_ready(lambda: two.tcp_open(one.address, 8098), timeout=30)
        lab.partition(2)  # type: ignore[attr-defined]
        assert not two.tcp_open(one.address, 8098, timeout=1.0)
        lab.heal(2)  # type: ignore[attr-defined]
        assert two.tcp_open(one.address, 8098, timeout=5.0)
        # a WAN change (what a study does between points) then a cut again; a cut in effect
        # survives a WAN change
        name = lab.name  # type: ignore[attr-defined]
        lab.set_wan(labspec.parse({"name": name, "sites": 2, "delay_ms": 1}))  # type: ignore[attr-defined]
        lab.partition(2)  # type: ignore[attr-defined]
        assert not two.tcp_open(one.address, 8098, timeout=1.0)
        lab.set_wan(labspec.parse({"name": name, "sites": 2, "delay_ms": 0}))  # type: ignore[attr-defined]
        assert not two.tcp_open(one.address, 8098, timeout=1.0)
        lab.heal(2)  # type: ignore[attr-defined]
        assert two.tcp_open(one.address, 8098, timeout=5.0)
    finally:
        lab.heal()  # type: ignore[attr-defined]
        srv.stop(grace_s=5)


def test_the_resource_profile_samples_what_runs_at_each_place(lab: object, tmp_path: Path) -> None:
    """The run's sampler (``profile.start``) on either kind of lab: the servers started through
    each place, their children and a load driver, named from their records, per site; on hosts
    each host's clock offset measured (one machine here: ~0) and its WAN link counted."""
    import time

    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from juice.lab.place import Ref
    from juice.profile import sampler
    from juice.services.base import ServerRecord

    parent = ("import subprocess, time; c = subprocess.Popen(['sleep', '120']); print(c.pid, flush=True); "
              "time.sleep(120)")
    refs: dict[int, list[Ref]] = {}
    recs: list[ServerRecord] = []
    children: dict[int, int] = {}
    driver = None
    try:
        for site in (1, 2):
            place: Place = lab.place(site)  # type: ignore[attr-defined]
            home = place.root / f"s{site}" / "prof"
            place.mkdir(home)
            p = place.start([sys.executable, "-c", parent], log=home / "out.log")
            refs[site] = [p.ref]
            recs.append(ServerRecord(kind="sleeper", site=site, pid=p.pid, pid_start=p.start, datadir="",
                                     log="", port=0))
            for _ in range(100):
                out = (place.read(home / "out.log") or b"").split()
                if out:
                    children[site] = int(out[0])
                    break
                time.sleep(0.1)
            child = place.adopt(children[site])
            assert child is not None
            refs[site].append(child)
        driver = lab.popen(2, [sys.executable, "-c", "import time; time.sleep(120)", "juice.driver"])  # type: ignore[attr-defined]
        time.sleep(0.5)

        class Svc:
            def records(self) -> list[ServerRecord]:
                return recs

        prof = sampler.start(lab, lambda: [Svc()], tmp_path, sampler.Settings(interval_s=0.25), print)  # type: ignore[arg-type]
        assert prof is not None
        time.sleep(1.5)
        summary = prof.stop()
    finally:
        if driver is not None:
            driver.kill()
            driver.wait(10)
        for site, rs in refs.items():
            lab.place(site).terminate(rs, grace_s=5)  # type: ignore[attr-defined]
    assert summary["errors"] == 0, summary["error_samples"]
    df = pq.read_table(tmp_path / "profile.parquet").to_pandas()
    df[["component", "metric"]] = df[["component", "metric"]].astype(str)
    by_pid = df.groupby("pid")[["component", "site"]].first()
    for site in (1, 2):
        for pid in (recs[site - 1].pid, children[site]):  # the server and its child
            assert tuple(by_pid.loc[pid]) == ("sleeper", site), (pid, by_pid)
    assert {"sleeper", "load-driver"} <= set(df.loc[df.site == 2, "component"])
    assert set(df.loc[df.component == "link", "site"]) >= {1, 2}
    hosts = lab.sampled_hosts()  # type: ignore[attr-defined]
    if hosts is not None:  # on hosts: a clock offset per host, measured (this machine's clock: 0)
        assert summary["source"] == "hosts" and set(summary["clock_offsets"]) == {"1", "2"}
        # the true offset is 0 (OFFSETS: no libfaketime) up to Juice's own clock, which maps the
        # monotonic clock to this machine's time.time() from one anchor (juice.load.api.Clock;
        # 249 us off under a load of 12 once, before its anchor took the tightest of 7 reads):
        # within RTT/2 plus that anchor's error (the hosts' real offsets, of seconds and both
        # signs, are checked to microseconds in tests/hosts/test_clocks.py)
        for off in summary["clock_offsets"].values():
            assert abs(off["offset_s"]) <= off["rtt_s"] / 2 + 1e-3 and 0 < off["rtt_s"] < 1.0, off
        assert "juice-agent" in set(df["component"])
        assert all(h["sampler_cpu_s"] > 0 and h["end"] == "stdin closed" for h in summary["hosts"])
