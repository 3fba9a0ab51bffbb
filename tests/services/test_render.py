"""Pure config rendering: no servers, no root."""

from __future__ import annotations

from pathlib import Path

import pytest

from juice.errors import ServiceError, UserError
from juice.lab.place import ThisHost
from juice.services.databases import cockroach, counters, galera, mariadb, postgres
from juice.services.kinds import BUSES, build, load_record, record


def test_mariadb_args_are_explicit_and_run_as_mysql() -> None:
    args = mariadb.server_args(mariadb.ServerOptions(bind="10.210.1.2", port=3307), Path("/w/s1/m"))
    assert args[:3] == [mariadb.MARIADBD, "--no-defaults", "--user=mysql"]
    assert "--bind-address=10.210.1.2" in args and "--port=3307" in args
    assert "--datadir=/w/s1/m/data" in args and "--pid-file=/w/s1/m/mysqld.pid" in args
    cnf = mariadb.render_mycnf(mariadb.ServerOptions(bind="10.210.1.2"), Path("/w/s1/m"))
    assert "[mariadbd]" in cnf and "bind-address=10.210.1.2" in cnf and "\nno-defaults" not in cnf


def test_galera_provider_options_are_wan_tolerant() -> None:
    opts = galera.GaleraOptions(segments={2: 1}, provider_extra=(("gcs.fc_limit", "64"),))
    po = dict(kv.split("=", 1) for kv in galera.render_provider_options("10.210.2.2", 2, opts).split(";"))
    assert po["gmcast.listen_addr"] == "tcp://10.210.2.2:4567"
    assert po["ist.recv_addr"] == "10.210.2.2:4568"
    assert po["evs.suspect_timeout"] == "PT30S" and po["evs.install_timeout"] == "PT1M"
    assert po["evs.send_window"] == "512" and po["gmcast.segment"] == "1"
    assert po["gcs.fc_limit"] == "64"


def test_galera_wsrep_args_name_every_node() -> None:
    ips = ["10.210.1.2", "10.210.2.2", "10.210.3.2"]
    args = dict(galera.wsrep_args(ips, 3, galera.GaleraOptions()))
    assert args["wsrep-cluster-address"] == "gcomm://10.210.1.2:4567,10.210.2.2:4567,10.210.3.2:4567"
    assert args["wsrep-node-address"] == "10.210.3.2" and args["wsrep-node-name"] == "s3"
    assert args["binlog-format"] == "ROW" and args["innodb-autoinc-lock-mode"] == "2"


def test_postgres_conf_and_sync_quorum() -> None:
    conf = postgres.render_conf("10.210.1.2", 5432, Path("/w/s1/pg"), postgres.PgOptions())
    assert "listen_addresses = '10.210.1.2'" in conf
    assert "shared_preload_libraries = 'pg_stat_statements'" in conf
    assert "hot_standby = on" in conf
    names = ["s2", "s3", "s4"]
    assert postgres.sync_standby_names(postgres.PgOptions(), names) == ""
    assert postgres.sync_standby_names(postgres.PgOptions(sync_quorum=2), names) == "ANY 2 (s2, s3, s4)"
    with pytest.raises(ServiceError, match="sync_quorum"):
        postgres.sync_standby_names(postgres.PgOptions(sync_quorum=4), names)
    assert "host replication all 10.210.0.0/16 trust" in postgres.render_hba()


@pytest.mark.parametrize(("sql", "cmd"), [
    ("SELECT 1", "select"), ("  /* c */ select * from t", "select"),
    ("(SELECT 1) UNION (SELECT 2)", "select"),
    ("INSERT INTO t VALUES ($1)", "insert"), ("update t set a = $1", "update"), ("DELETE FROM t", "delete"),
    ("WITH x AS (SELECT 1) SELECT * FROM x", "select"),
    ("WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", "delete"),
    ("BEGIN", "begin"), ("-- hi\nCOMMIT", "commit"),
])
def test_command_of(sql: str, cmd: str) -> None:
    assert counters.command_of(sql) == cmd


def test_counter_delta() -> None:
    before = {"Com_select": 10, "Com_insert": 1}
    after = {"Com_select": 17, "Com_insert": 4, "Com_update": 2}
    c = counters.delta(before, after, counters.MYSQL_READS, counters.MYSQL_WRITES)
    assert (c.reads, c.writes, c.ratio) == (7, 5, 1.4)
    assert c.per_command == {"Com_select": 7, "Com_insert": 3, "Com_update": 2}
    assert round(c.pct_reads, 2) == 58.33


def test_cockroach_args_and_missing_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    args = cockroach.start_args("/x/cockroach", Path("/w/s2/c"), "10.210.2.2", 2, ["10.210.1.2"])
    assert "--locality=region=s2" in args and "--join=10.210.1.2:26257" in args
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UserError, match="cockroach binary not found on PATH: CockroachDB is not packaged"):
        cockroach.binary()


class _FakeSites:
    """Not under test: just enough of a lab for ``build`` to validate options (nothing runs)."""

    sites = range(1, 4)
    workdir = Path("/nonexistent")

    def site_ip(self, site: int) -> str:
        return f"10.210.{site}.2"

    def place(self, site: int) -> ThisHost:
        return ThisHost(self.workdir)


def test_build_rejects_bad_input() -> None:
    fake = _FakeSites()
    with pytest.raises(UserError, match="kind: unknown database or bus 'oracle'.*buses: rabbitmq"):
        build(fake, "oracle")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="galera: unknown option"):
        build(fake, "galera", colour="blue")  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="sync_quorum: 3 exceeds"):
        build(fake, "postgres-readlocal", sync_quorum=3)  # type: ignore[arg-type]


def test_build_buses_nothing_started(tmp_path: Path) -> None:
    from juice.services.buses.nats import Nats
    from juice.services.buses.rabbitmq import RabbitMQ
    from juice.services.buses.rabbitmq_federation import RabbitFederation

    fake = _FakeSites()
    fake.workdir = tmp_path  # type: ignore[misc]
    mq = build(fake, "rabbitmq", nodes="1,2", queues="quorum")  # type: ignore[arg-type]
    assert isinstance(mq, RabbitMQ) and mq.kind == "rabbitmq" and mq.cluster
    assert [n.site for n in mq.nodes] == [1, 2] and mq.queues == "quorum" and mq.servers == {}
    single = build(fake, "rabbitmq", nodes=2, cluster=False)  # type: ignore[arg-type]
    assert isinstance(single, RabbitMQ) and [n.site for n in single.nodes] == [2] and not single.cluster
    fed = build(fake, "rabbitmq-federation", sites=[1, 3], topics="compute,conductor")  # type: ignore[arg-type]
    assert isinstance(fed, RabbitFederation) and fed.kind == "rabbitmq-federation"
    assert fed.topics == ["compute", "conductor"] and [n.site for n in fed.nodes] == [1, 3]
    nats = build(fake, "nats", topology="gateways")  # type: ignore[arg-type]
    assert isinstance(nats, Nats) and nats.topology == "gateways" and nats.server_sites == [1, 2, 3]
    # services.json: every lab site gets an endpoint; site 2 has no federation broker -> the first
    record(fake, fed, 1.0)  # type: ignore[arg-type]
    rec = load_record(tmp_path)
    assert rec is not None and rec["kind"] == "rabbitmq-federation" and rec["servers"] == []
    assert {s: e["write"]["host"] for s, e in rec["endpoints"].items()} == \
        {"1": "10.210.1.2", "2": "10.210.1.2", "3": "10.210.3.2"}
    assert rec["endpoints"]["3"]["read"]["driver"] == "rabbit"
    record(fake, nats, 1.0)  # type: ignore[arg-type]
    rec = load_record(tmp_path)
    assert rec is not None and rec["endpoints"]["2"]["read"] == {
        "driver": "nats", "host": "10.210.2.2", "port": 4222, "user": "", "password": "",
        "database": "", "site": 2}
    assert set(BUSES) == {"rabbitmq", "rabbitmq-federation", "nats"}


def test_build_buses_rejects_bad_input() -> None:
    fake = _FakeSites()
    with pytest.raises(UserError, match="rabbitmq: unknown option 'colour' .options: nodes, cluster, queues"):
        build(fake, "rabbitmq", colour="blue")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="nats: unknown option 'nodes'"):
        build(fake, "nats", nodes=[1])  # type: ignore[arg-type]
    with pytest.raises(UserError, match="rabbitmq: nodes: expected site numbers"):
        build(fake, "rabbitmq", nodes="one,two")  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="topology"):
        build(fake, "nats", topology="mesh")  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="queues: expected"):
        build(fake, "rabbitmq", queues="stream")  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="sites: 7 is not a site"):
        build(fake, "rabbitmq-federation", sites="1,7")  # type: ignore[arg-type]
