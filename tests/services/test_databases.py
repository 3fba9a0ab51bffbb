"""Real servers inside a real 3-site lab (10 ms one-way). Every test stops what it starts
(the service context manager), and the module's lab is removed afterwards.

No timing thresholds: the only latency check is a lower bound the WAN guarantees
(a query from site 3 to site 1 cannot take less than one RTT)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psycopg
import pytest

from juice.errors import UserError
from juice.lab import LocalLab
from juice.lab import setns as client
from juice.services import deploy
from juice.services.databases import counters
from juice.services.databases import mariadb as mdb
from juice.services.databases import postgres as pg
from juice.services.databases.galera import Galera
from juice.services.databases.postgres import Postgres
from tests.services.conftest import needs_lab

pytestmark = needs_lab


def no_servers_left(lab: LocalLab) -> bool:
    """True when no mariadbd/postgres runs in any site namespace of ``lab``."""
    pids = []
    for s in lab.sites:
        cp = lab.run(s, ["ip", "netns", "pids", lab.site_ns(s)], check=False)
        pids += cp.stdout.split()
    comms = []
    for p in pids:
        try:
            comms.append(Path(f"/proc/{p}/comm").read_text().strip())
        except FileNotFoundError:
            pass
    return not any(c in ("mariadbd", "postgres") for c in comms)


def test_central_mariadb_is_read_across_the_wan(lab3: LocalLab) -> None:
    with deploy(lab3, "mariadb") as db:
        ep = db.endpoint(3).read
        assert ep.host == lab3.site_ip(1) and ep == db.endpoint(1).write
        n = 10

        def reads() -> tuple[float, list[tuple[object, ...]]]:
            conn = mdb.connect(ep)
            try:
                with conn.cursor() as cur:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        cur.execute("SELECT @@hostname, 1")
                        rows = list(cur.fetchall())
                    return time.perf_counter() - t0, rows
            finally:
                conn.close()

        # shipped defaults: MariaDB's own 151 connections, not recorded as a deviation
        assert db.server.query("SHOW VARIABLES LIKE 'max_connections'") == [("max_connections", "151")]
        assert "max_connections" not in {d.option for d in db.deviations()}
        elapsed, rows = client.in_site(lab3.site_ns(3), reads)
        assert rows[0][1] == 1
        rtt_s = (lab3.links[(3, 1)].delay_ms + lab3.links[(1, 3)].delay_ms) / 1000
        # Each query is one round trip across the WAN: n of them take at least n RTTs.
        assert elapsed / rtt_s >= n * 0.95
    assert no_servers_left(lab3)


def _as_server_shows(value: str) -> str:
    """A deviation's value as SHOW VARIABLES prints it (sizes in bytes)."""
    if value[:-1].isdigit() and value[-1] in "MG":
        return str(int(value[:-1]) * 1024 ** (2 if value[-1] == "M" else 3))
    return value


def test_mariadb_runs_with_exactly_its_recorded_deviations(lab3: LocalLab) -> None:
    """max_connections from the spec reaches the server and the record; every deviation the
    service lists is what the running server reports."""
    with deploy(lab3, "mariadb", max_connections=64) as db:
        assert isinstance(db, mdb.MariaDBCentral)
        found = {d.option: d for d in db.deviations()}
        assert found["max_connections"].source == "spec" and found["max_connections"].default == "151"
        for option, d in found.items():
            rows = db.server.query(f"SHOW GLOBAL VARIABLES LIKE '{option}'")
            assert rows == [(option, _as_server_shows(d.value))], option
    assert no_servers_left(lab3)


def test_galera_three_nodes_replicate(lab3: LocalLab) -> None:
    with deploy(lab3, "galera") as db:
        assert isinstance(db, Galera)
        assert [db.cluster_size(n) for n in db.nodes.values()] == [3, 3, 3]
        assert all(n.status("wsrep_ready") == "ON" for n in db.nodes.values())
        assert db.endpoint(2).write.host == lab3.site_ip(2)  # clients use their local node
        node = db.nodes[2]
        for d in db.deviations():  # what the nodes run with is what the record says
            if d.option.startswith("wsrep_provider_options "):
                got = node.query("SHOW GLOBAL VARIABLES LIKE 'wsrep_provider_options'")[0][1]
                assert f"{d.option.split()[1]} = {d.value}" in got, d
            else:
                assert node.query(f"SHOW GLOBAL VARIABLES LIKE '{d.option}'") == [
                    (d.option, _as_server_shows(d.value))], d.option

        def write() -> None:
            conn = mdb.connect(db.endpoint(1).write)
            with conn.cursor() as cur:
                cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
                cur.execute("INSERT INTO t VALUES (1, 'from s1')")
            conn.close()

        client.in_site(lab3.site_ns(1), write)

        def read() -> list[tuple[object, ...]]:
            conn = mdb.connect(db.endpoint(3).read)
            with conn.cursor() as cur:
                cur.execute("SET SESSION wsrep_sync_wait = 1")  # causal read
                cur.execute("SELECT v FROM t WHERE id = 1")
                rows = list(cur.fetchall())
            conn.close()
            return rows

        assert client.in_site(lab3.site_ns(3), read) == [("from s1",)]
    assert no_servers_left(lab3)


def test_postgres_central_and_read_local(lab3: LocalLab) -> None:
    with deploy(lab3, "postgres") as db:
        assert db.endpoint(3).read.host == lab3.site_ip(1)
        assert isinstance(db, Postgres)
        assert db.primary.query("SHOW max_connections") == [("100",)]  # PostgreSQL's own
        for d in db.deviations():  # what the server runs with is what the record says
            assert db.primary.query(f"SHOW {d.option}") == [(d.value,)], d.option
        got = client.in_site(lab3.site_ns(2), lambda: _pg_one(db.endpoint(2).read, "SELECT 41 + 1"))
        assert got == 42
    with deploy(lab3, "postgres-readlocal", sync_quorum=1) as db:
        assert isinstance(db, Postgres)
        ep3 = db.endpoint(3)
        assert ep3.read.host == lab3.site_ip(3) and ep3.write.host == lab3.site_ip(1)

        def write() -> None:
            with pg.connect(ep3.write) as conn:
                conn.execute("CREATE TABLE t (id int primary key, v text)")
                conn.execute("INSERT INTO t VALUES (1, 'from primary')")

        client.in_site(lab3.site_ns(3), write)
        # The write becomes visible on the standby of site 3 (bounded wait: replication lag).
        deadline = time.monotonic() + 20
        seen = None
        while time.monotonic() < deadline:
            try:
                seen = client.in_site(lab3.site_ns(3), lambda: _pg_one(ep3.read, "SELECT v FROM t"))
                break
            except psycopg.errors.UndefinedTable:
                time.sleep(0.1)
        assert seen == "from primary"

        def write_standby() -> None:
            with pg.connect(ep3.read) as conn:
                conn.execute("INSERT INTO t VALUES (2, 'from standby')")

        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            client.in_site(lab3.site_ns(3), write_standby)
    assert no_servers_left(lab3)


def _pg_one(ep: object, sql: str) -> object:
    assert isinstance(ep, pg.Endpoint)
    with pg.connect(ep) as conn:
        row = conn.execute(sql.encode()).fetchone()
        assert row is not None
        return row[0]


KNOWN = {"select": 7, "insert": 3, "update": 2, "delete": 1}


def test_counters_are_exact_on_mariadb(lab3: LocalLab) -> None:
    with deploy(lab3, "mariadb") as db:
        ep = db.endpoint(2).write
        ddl = ["CREATE TABLE c (id INT PRIMARY KEY, v INT)"]
        client.in_site(lab3.site_ns(2), lambda: _mysql_run(ep, ddl))
        probe = counters.probe_for(db)
        with probe.window() as w:
            client.in_site(lab3.site_ns(2), lambda: _mysql_run(ep, _known_statements()))
        c = w.result
        assert (c.reads, c.writes) == (7, 6)
        assert c.per_command == {"Com_select": 7, "Com_insert": 3, "Com_update": 2, "Com_delete": 1}
        assert c.exact


def test_counters_are_exact_on_galera_despite_replication(lab3: LocalLab) -> None:
    """Appliers count replicated writes in their Com_*; the Galera probe must not."""
    with deploy(lab3, "galera") as db:
        for site, table in ((2, "c"), (3, "d")):
            ep = db.endpoint(site).write
            client.in_site(lab3.site_ns(site), lambda ep=ep, t=table: _mysql_run(
                ep, [f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)"]))
        probe = counters.probe_for(db)
        with probe.window() as w:
            for site, table in ((2, "c"), (3, "d")):  # writes from two sites, one table each
                ep = db.endpoint(site).write
                stmts = [x.replace(" c ", f" {table} ") for x in _known_statements()]
                client.in_site(lab3.site_ns(site), lambda ep=ep, stmts=stmts: _mysql_run(ep, stmts))
            time.sleep(0.5)  # let the other nodes apply the write-sets
        c = w.result
        assert (c.reads, c.writes) == (14, 12)
        assert c.per_command == {"Com_select": 14, "client_writes": 12}


def test_counters_are_exact_on_postgres_read_local(lab3: LocalLab) -> None:
    with deploy(lab3, "postgres-readlocal") as db:
        ep = db.endpoint(2)
        ddl = ["CREATE TABLE c (id int primary key, v int)"]
        client.in_site(lab3.site_ns(2), lambda: _pg_run(ep.write, ddl))
        probe = counters.probe_for(db)
        with probe.window() as w:
            stmts = _known_statements()
            writes = [s for s in stmts if "SELECT" not in s]
            client.in_site(lab3.site_ns(2), lambda: _pg_run(ep.write, writes))
            # Reads go to the local standby: the probe sums every server.
            time.sleep(0.5)
            client.in_site(lab3.site_ns(2), lambda: _pg_run(ep.read, [s for s in stmts if "SELECT" in s]))
        c = w.result
        assert {k: c.per_command.get(k, 0) for k in KNOWN} == KNOWN
        assert (c.reads, c.writes, c.exact) == (7, 6, True)


def _known_statements() -> list[str]:
    return ([f"INSERT INTO c VALUES ({i}, {i})" for i in range(3)]
            + [f"SELECT v FROM c WHERE id = {i % 3}" for i in range(7)]
            + ["UPDATE c SET v = v + 1 WHERE id = 0", "UPDATE c SET v = v + 1 WHERE id = 1",
               "DELETE FROM c WHERE id = 2"])


def _mysql_run(ep: mdb.Endpoint, stmts: list[str]) -> None:
    conn = mdb.connect(ep)
    try:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)
                cur.fetchall()
    finally:
        conn.close()


def _pg_run(ep: pg.Endpoint, stmts: list[str]) -> None:
    with pg.connect(ep) as conn:
        for s in stmts:
            conn.execute(s.encode())


def test_cockroach_missing_binary_is_a_clear_error(lab3: LocalLab) -> None:
    if shutil.which("cockroach") is not None:
        pytest.skip("[optional] a cockroach binary is on PATH: the missing-binary message cannot be shown")
    with pytest.raises(UserError, match="cockroach binary not found on PATH"):
        deploy(lab3, "cockroach")


@pytest.mark.skipif(shutil.which("cockroach") is None,
                    reason="[optional] cockroach binary not on PATH (CockroachDB is not packaged for Debian "
                           "and cannot be downloaded here: only a user-provided binary is supported)")
def test_cockroach_cluster(lab3: LocalLab) -> None:
    with deploy(lab3, "cockroach") as db:
        assert client.in_site(lab3.site_ns(2), lambda: _pg_one(db.endpoint(2).read, "SELECT 1")) == 1

