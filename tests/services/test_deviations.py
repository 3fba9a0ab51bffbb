"""Server settings that differ from the shipped defaults, as data (no server started): what each
service's command line or config changes is listed with a reason, spec-set options render under
their upstream names and are recorded as the spec's, bad values are one-line UserErrors, and the
list round-trips through a run's manifest into the report's table."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from juice.errors import UserError
from juice.report import deviations as report_devs
from juice.services import deviations as devs
from juice.services.buses.rabbitmq import deviations as rabbit_deviations
from juice.services.caches.memcached import Memcached
from juice.services.caches.memcached import server_args as memcached_args
from juice.services.caches.redis import Redis
from juice.services.databases.cockroach import Cockroach
from juice.services.databases.galera import GaleraOptions, galera_deviations
from juice.services.databases.mariadb import ServerOptions, check_max_connections, server_args
from juice.services.databases.mariadb import deviations as mariadb_deviations
from juice.services.databases.postgres import PgOptions
from juice.services.databases.postgres import deviations as pg_deviations
from juice.services.databases.postgres import render_conf as pg_conf
from juice.services.deviations import JUICE, SOURCES, SPEC, Deviation
from juice.services.openstack.keystone import KeystoneOptions, render_conf
from juice.services.openstack.keystone_settings import keystone_deviations
from juice.services.openstack.nova_conf import ComputeOptions, ConfContext, NovaOptions, render_nova_conf
from juice.services.openstack.nova_deploy import NovaStack
from juice.services.openstack.nova_settings import compute_deviations, db_connections, nova_deviations
from tests.services.conftest import FakeSites

HOME = Path("/lab/s1/mariadb")


def _well_formed(found: list[Deviation]) -> None:
    assert found
    for d in found:
        assert d.reason.strip() and d.source in SOURCES and d.value != d.default, d


def _ks_conf(opts: KeystoneOptions) -> str:
    return render_conf(db_url="mysql+pymysql://k@h/keystone", slave_url=None, memcache=None,
                       fernet_dir=Path("/f"), credential_dir=Path("/c"), opts=opts)


def _nova_conf(role: str, opts: NovaOptions) -> str:
    ctx = ConfContext(transport_url="rabbit://j:j@h:5672/", api_db_url="mysql+pymysql://n@h/nova_api",
                      cell_db_url="mysql+pymysql://n@h/nova", auth_url="http://h:5000/v3",
                      region="RegionOne", password="pw", state_root="/lab/nova")
    return render_nova_conf(role, ctx, opts, host="juice-h")


def test_mariadb_keeps_its_max_connections_unless_told() -> None:
    plain = ServerOptions(bind="10.0.0.1")
    assert not any(a.startswith("--max-connections") for a in server_args(plain, HOME))
    assert "--innodb-buffer-pool-size=128M" in server_args(plain, HOME)
    found = mariadb_deviations(plain)
    _well_formed(found)
    assert "max_connections" not in {d.option for d in found}
    assert "innodb_buffer_pool_size" not in {d.option for d in found}  # 128M is the default
    assert {d.source for d in found} == {JUICE}


def test_max_connections_from_the_spec_or_the_deployment_is_recorded_with_its_source() -> None:
    spec = ServerOptions(bind="10.0.0.1", max_connections=300)
    assert "--max-connections=300" in server_args(spec, HOME)
    (mc,) = [d for d in mariadb_deviations(spec) if d.option == "max_connections"]
    assert (mc.value, mc.default, mc.source) == ("300", "151", SPEC)
    why = "the deployment's pools: 505"
    ours = ServerOptions(bind="10.0.0.1", max_connections=505, max_connections_reason=why)
    (mc,) = [d for d in mariadb_deviations(ours, "galera") if d.option == "max_connections"]
    assert (mc.server, mc.source, mc.reason) == ("galera", JUICE, why)


@pytest.mark.parametrize("bad", [0, -3, 100_001, True])
def test_bad_max_connections_is_one_line_naming_the_field(bad: Any) -> None:
    with pytest.raises(UserError, match=r"^db_max_connections: expected 1\.\.100000") as e:
        check_max_connections(bad, "db_max_connections")
    assert "\n" not in str(e.value)


def test_galera_lists_what_galera_needs_and_its_wan_timeouts() -> None:
    found = galera_deviations(GaleraOptions())
    _well_formed(found)
    by = {d.option: d for d in found}
    assert by["binlog_format"].default == "MIXED"
    assert by["wsrep_provider_options evs.suspect_timeout"].value == "PT30S"
    assert "wsrep_slave_threads" not in by  # back to Galera's 1
    assert by["wsrep_provider_options gcache.size"].default == "128M"


def test_postgres_keeps_its_max_connections_unless_told() -> None:
    assert "max_connections" not in pg_conf("10.0.0.1", 5432, Path("/s"), PgOptions())
    assert "max_connections = 40\n" in pg_conf("10.0.0.1", 5432, Path("/s"), PgOptions(max_connections=40))
    _well_formed(pg_deviations(PgOptions()))
    (mc,) = [d for d in pg_deviations(PgOptions(max_connections=40)) if d.option == "max_connections"]
    assert (mc.default, mc.source) == ("100", SPEC)


def test_keystone_pools_are_oslo_db_defaults_unless_set() -> None:
    plain = _ks_conf(KeystoneOptions())
    assert "max_pool_size" not in plain and "max_overflow" not in plain
    assert "connection_recycle_time" not in plain
    conf = _ks_conf(KeystoneOptions(max_pool_size=20, max_overflow=0))
    assert "max_pool_size = 20\n" in conf and "max_overflow = 0\n" in conf
    found = keystone_deviations(KeystoneOptions(max_pool_size=20, max_overflow=0, password_hash_rounds=4))
    _well_formed(found)
    by = {d.option: d for d in found}
    assert by["[database] max_pool_size"].source == SPEC and by["[database] max_pool_size"].default == "5"
    assert by["[identity] password_hash_rounds"].default == "12"
    assert by["[cache] enabled"].value == "true"
    assert "[cache] enabled" not in {d.option for d in keystone_deviations(KeystoneOptions(cache=False))}


@pytest.mark.parametrize(("over", "field"), [({"max_pool_size": 0}, "max_pool_size"),
                                             ({"max_overflow": -2}, "max_overflow")])
def test_keystone_bad_pool_named(over: dict[str, int], field: str) -> None:
    with pytest.raises(UserError, match=f"^{field}: "):
        KeystoneOptions(**over)  # type: ignore[arg-type]


def test_nova_rpc_and_pool_options_render_under_upstream_names() -> None:
    plain = _nova_conf("conductor", NovaOptions())
    for name in ("max_pool_size", "max_overflow", "rpc_response_timeout", "executor_thread_pool_size",
                 "connection_recycle_time"):
        assert name not in plain
    opts = NovaOptions(rpc_response_timeout=120, executor_thread_pool_size=8, rpc_conn_pool_size=4,
                       max_overflow=5)
    conf = _nova_conf("conductor", opts)
    for line in ("rpc_response_timeout = 120", "executor_thread_pool_size = 8", "rpc_conn_pool_size = 4",
                 "max_overflow = 5"):
        assert line in conf
    found = nova_deviations(opts)
    _well_formed(found)
    by = {d.option: d for d in found}
    assert by["[DEFAULT] rpc_response_timeout"].default == "60"
    assert by["[DEFAULT] executor_thread_pool_size"].source == SPEC
    assert by["[conductor] workers"].source == JUICE  # Juice's 1, nova's one per CPU
    assert nova_deviations(NovaOptions(conductor_workers=3))[2].source == SPEC
    _well_formed(compute_deviations(ComputeOptions()))


@pytest.mark.parametrize(("over", "field"), [({"rpc_response_timeout": 0}, "rpc_response_timeout"),
                                             ({"executor_thread_pool_size": 0}, "executor_thread_pool_size"),
                                             ({"max_overflow": -2}, "max_overflow")])
def test_nova_bad_option_named(over: dict[str, int], field: str) -> None:
    with pytest.raises(UserError, match=f"^{field}: "):
        NovaOptions(**over)  # type: ignore[arg-type]


def test_nova_database_limit_is_the_sum_of_the_pools_and_says_so() -> None:
    one, _ = db_connections(NovaOptions(), placement_workers=2, keystone=55)
    more, how = db_connections(NovaOptions(schedulers=3, conductor_workers=2), placement_workers=2,
                               keystone=55)
    assert more - one == 3 * 2 * 55  # two more schedulers and a conductor worker: 2 engines x (5 + 50)
    assert "x 2 databases x 55" in how
    limit, why = NovaStack().db_limit()
    assert limit is not None and limit > 151 and why is not None and "pools" in why
    assert NovaStack(db_max_connections=200).db_limit() == (200, None)  # the spec's, as is
    small = NovaOptions(max_pool_size=1, max_overflow=0)
    assert NovaStack(nova=small, placement_workers=1, glance_workers=1,
                     network_service="fake-neutron").db_limit() == (None, None)  # fits
    # the real glance's pools count (2 workers x oslo.db's 5 + 50), and the real neutron's (1 worker);
    # the stand-ins have none
    assert NovaStack().db_limit()[0] == (NovaStack(image_service="fake-glance").db_limit()[0] or 0) + 110
    assert NovaStack().db_limit()[0] == (NovaStack(network_service="fake-neutron").db_limit()[0] or 0) + 55


def test_memcached_rabbitmq_redis_cockroach() -> None:
    argv = memcached_args("10.0.0.1", 11211, 64, "memcache")
    assert "-c" not in argv and "-t" not in argv  # memcached's own 1024 connections, 4 threads
    assert Memcached(FakeSites(), sites=[1]).deviations() == []  # 64 MB is memcached's default
    _well_formed(Memcached(FakeSites(), sites=[1], memory_mb=1024).deviations())
    _well_formed(rabbit_deviations("classic"))
    assert any(d.source == SPEC for d in rabbit_deviations("mirrored"))
    _well_formed(Redis(FakeSites(), maxmemory_mb=256).deviations())  # type: ignore[arg-type]
    _well_formed(Cockroach(FakeSites()).deviations())  # type: ignore[arg-type]


class _Svc:
    def __init__(self, found: list[Deviation]) -> None:
        self.found = found

    def deviations(self) -> list[Deviation]:
        return self.found


def _manifest(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    run = tmp_path / "study" / name
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"workload": "toy", "run_key": name, **data}))
    return run / "manifest.json"


def test_deviations_round_trip_through_a_manifest(tmp_path: Path) -> None:
    a = Deviation("mariadb", "max_connections", "300", "151", "set in the spec", SPEC)
    b = Deviation("keystone", "[cache] enabled", "true", "false", "devstack does", JUICE)
    found = devs.of([_Svc([a, b]), _Svc([a]), object()])
    assert found == [a, b]
    m = _manifest(tmp_path, "r1", {})
    os.utime(m, ns=(1_000_000_000, 1_000_000_000))
    devs.add_to_manifest(m, found)
    data = json.loads(m.read_text())
    assert devs.stored(data) == [a, b] and m.stat().st_mtime_ns == 1_000_000_000
    assert devs.stored({"workload": "toy"}) == []  # written before deviations were recorded
    assert devs.stored({"deviations": [{"server": "x"}, 3]}) == []  # damaged entries are skipped


def test_report_table_counts_runs_and_skips_older_ones(tmp_path: Path) -> None:
    a = Deviation("mariadb", "max_connections", "300", "151", "set in the spec", SPEC)
    b = Deviation("mariadb", "max_connections", "500", "151", "set in the spec", SPEC)
    runs: list[dict[str, Any]] = [{"deviations": [a.as_dict()]}, {"deviations": [b.as_dict()]},
                                  {"deviations": [a.as_dict()]}, {"workload": "old"}]
    t = report_devs.table(runs)
    assert list(t["value"]) == ["300", "500"] and list(t["runs"]) == ["2 of 3", "1 of 3"]
    assert list(report_devs.table(runs[:1])["runs"]) == ["all"]
    ours = Deviation("rabbitmq", "disk_free_limit.absolute", "10MB", "50MB", "tmpfs", JUICE)
    mixed = report_devs.table([{"deviations": [ours.as_dict(), a.as_dict()]}])
    assert list(mixed["set by"]) == [SPEC, JUICE]  # what the spec set comes first


def test_report_section_of_runs(tmp_path: Path) -> None:
    assert report_devs.section([tmp_path]) == ""
    old = _manifest(tmp_path, "old", {})
    assert report_devs.section([tmp_path / "study"]) == ""  # runs from before: no table
    m = _manifest(tmp_path, "new", {})
    devs.add_to_manifest(m, [Deviation("rabbitmq", "disk_free_limit.absolute", "10MB", "50MB", "<tmpfs>")])
    html = report_devs.section([tmp_path / "study"], heading="h3")
    assert "<h3>Server settings that differ from the shipped defaults</h3>" in html
    assert "disk_free_limit.absolute" in html and "&lt;tmpfs&gt;" in html
    assert "1 runs made before" in html
    assert report_devs.section([tmp_path / "study"], owns=lambda m: m.get("run_key") == "nope") == ""
    assert old.exists()
