"""The servers' own counters around a run (``juice.services.servercounters``): parsing of
memcached ``stats``, ``SHOW GLOBAL STATUS`` and the row counts, and what is derived from two
snapshots (window differences for totals, the start's value for levels, the hit and miss
rates). Pure functions: the real servers are read in the Keystone write-attribution run."""

from __future__ import annotations

from juice.services import servercounters as sc


def test_memcached_stats_keep_the_counters_that_matter_as_ints() -> None:
    stats = {"pid": "42", "get_hits": "90", "get_misses": "10", "curr_items": "7", "evictions": "0",
             "cmd_get": "100", "cmd_set": "12", "version": "1.6.18", "rusage_user": "0.5"}
    assert sc.parse_memcached(stats) == {"memcached.get_hits": 90, "memcached.get_misses": 10,
                                         "memcached.curr_items": 7, "memcached.evictions": 0,
                                         "memcached.cmd_get": 100, "memcached.cmd_set": 12}
    assert sc.parse_memcached({"get_hits": "n/a"}) == {}


def test_mysql_status_rows_map_to_innodb_and_galera_names() -> None:
    rows = [("Innodb_buffer_pool_reads", "165"), ("Innodb_buffer_pool_read_requests", "14260"),
            ("wsrep_cert_index_size", "31"), ("wsrep_local_cert_failures", "0"), ("Com_select", "9")]
    assert sc.parse_mysql_status(rows) == {"innodb.buffer_pool_reads": 165,
                                           "innodb.buffer_pool_read_requests": 14260,
                                           "galera.cert_index_size": 31, "galera.cert_failures": 0}


def test_connection_limit_counters_a_refusal_total_and_a_peak_read_at_the_end() -> None:
    rows = [("Connection_errors_max_connections", "7"), ("Max_used_connections", "151")]
    got = sc.parse_mysql_status(rows)
    assert got == {"mysql.refused_max_connections": 7, "mysql.max_used_connections": 151}
    d = sc.derived({"mysql.refused_max_connections": 7, "mysql.max_used_connections": 40},
                   {"mysql.refused_max_connections": 19, "mysql.max_used_connections": 151})
    assert d["mysql.refused_max_connections"] == 12  # refused in the window
    assert d["mysql.max_used_connections"] == 151  # the peak as the run ends


def test_row_counts_are_one_statement_with_quoted_names() -> None:
    mysql, pg = sc.rows_sql("keystone", "`"), sc.rows_sql("public", '"')
    assert mysql.count("COUNT(*)") == len(sc.TABLES) and "`keystone`.`user`" in mysql
    assert '"public"."user"' in pg  # user is a reserved word in both
    assert sc.parse_rows(("4", "4", "5", "3", "2", "")) == {"rows.user": 4, "rows.local_user": 4,
                                                            "rows.password": 5, "rows.project": 3,
                                                            "rows.assignment": 2}


def test_derived_takes_window_differences_levels_at_start_and_rates() -> None:
    start = {"memcached.get_hits": 100, "memcached.get_misses": 50, "memcached.curr_items": 30,
             "innodb.buffer_pool_reads": 10, "innodb.buffer_pool_read_requests": 1000,
             "innodb.history_list_length": 6, "rows.user": 1}
    end = {"memcached.get_hits": 190, "memcached.get_misses": 60, "memcached.curr_items": 80,
           "innodb.buffer_pool_reads": 12, "innodb.buffer_pool_read_requests": 1400,
           "innodb.history_list_length": 9, "rows.user": 5}
    d = sc.derived(start, end)
    assert d["memcached.get_hits"] == 90 and d["memcached.get_misses"] == 10
    assert d["cache_hit_rate"] == 0.9
    assert d["innodb.buffer_pool_reads"] == 2 and d["buffer_pool_miss_rate"] == 2 / 400
    assert d["memcached.curr_items"] == 30 and d["innodb.history_list_length"] == 6 and d["rows.user"] == 1


def test_postgres_miss_rate_and_missing_sources() -> None:
    d = sc.derived({"pg.blks_read": 5, "pg.blks_hit": 95}, {"pg.blks_read": 8, "pg.blks_hit": 192})
    assert d["buffer_pool_miss_rate"] == 3 / 100
    assert "cache_hit_rate" not in d  # no memcached (cache off): no rate, no error
    out = sc.record(sc.Snapshot({"rows.user": 1}, ["memcached: timed out"]), sc.Snapshot({"rows.user": 2}))
    assert out["derived"] == {"rows.user": 1.0} and out["errors"] == ["memcached: timed out"]


def test_host_counters_give_the_busy_fraction_of_the_window() -> None:
    stat0 = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n"
    stat1 = "cpu  250 0 100 900 50 0 0 0 0 0\ncpu0 125 0 50 450 25 0 0 0 0 0\n"
    h0, h1 = sc.parse_host(stat0, "3.41 4.2 4.5 3/900 77"), sc.parse_host(stat1, "2.00 4.0 4.4 1/900 78")
    assert h0 == {"host.cpu_total_jiffies": 1000, "host.cpu_busy_jiffies": 150, "host.load1_x100": 341}
    d = sc.derived(h0, h1)
    assert d["host_cpu_busy"] == 200 / 300 and d["host.load1_x100"] == 341  # a level: the start's


def test_a_deployment_without_servers_reads_only_this_machine() -> None:
    assert sc.ServerCounters(host=False).snapshot() == sc.Snapshot({}, [])
    snap = sc.ServerCounters().snapshot()
    assert set(snap.values) == {"host.cpu_total_jiffies", "host.cpu_busy_jiffies", "host.load1_x100"}
