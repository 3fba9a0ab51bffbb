"""Statement attribution's pure parts (``juice.services.databases.attribution``): the kind, table and
SET columns of normalized statements as MariaDB's digests and pg_stat_statements print them,
and a window's rows from two snapshots. The real servers are exercised by
tests/studies/keystone/test_write_attribution.py."""

from __future__ import annotations

import pytest

from juice.services.databases.attribution import Row, Window, rows_of, target

# MariaDB digest texts (backquotes, spaces around dots and operators, "?" for values)
MARIADB = [
    ("INSERT INTO `password` ( `local_user_id` , `password_hash` , `created_at_int` ) VALUES (...)",
     ("insert", "password", ())),
    ("UPDATE `user` SET `last_active_at` = ? WHERE `user` . `id` = ?",
     ("update", "user", ("last_active_at",))),
    ("UPDATE `local_user` SET `failed_auth_count` = ? , `failed_auth_at` = ? WHERE `local_user` . `id` = ?",
     ("update", "local_user", ("failed_auth_at", "failed_auth_count"))),
    ("DELETE FROM `revocation_event` WHERE `revocation_event` . `revoked_at` < ?",
     ("delete", "revocation_event", ())),
    ("SELECT `user` . `id` AS `user_id` , `user` . `enabled` AS `user_enabled` FROM `user` WHERE `user` . "
     "`id` = ?", ("select", "user", ())),
    ("SELECT `local_user` . `id` AS `local_user_id` , `local_user` . `user_id` AS `local_user_user_id` , "
     "`local_user` . `domain_id` AS `local_us", ("select", "local_user", ())),  # cut at 1,024 bytes
    ("SELECT ?", ("select", "", ())),
    ("REPLACE INTO `keystone` . `x` VALUES (...)", ("replace", "x", ())),
]
# pg_stat_statements texts (double quotes where a name is a keyword, $n for values)
POSTGRES = [
    ('INSERT INTO password (local_user_id, password_hash, created_at_int) VALUES ($1, $2, $3) RETURNING '
     'password.id', ("insert", "password", ())),
    ('UPDATE "user" SET last_active_at=$1::DATE WHERE "user".id = $2',
     ("update", "user", ("last_active_at",))),
    ("DELETE FROM revocation_event WHERE revocation_event.revoked_at < $1",
     ("delete", "revocation_event", ())),
    ('WITH x AS (SELECT 1) UPDATE project SET extra = $1 FROM x', ("update", "project", ("extra",))),
    ("SELECT anon_1.user_id FROM (SELECT \"user\".id AS user_id FROM \"user\") AS anon_1",
     ("select", "user", ())),
]


@pytest.mark.parametrize(("sql", "want"), MARIADB + POSTGRES)
def test_kind_table_and_columns_of_a_statement(sql: str, want: tuple[str, str, tuple[str, ...]]) -> None:
    assert target(sql) == want


def test_a_window_counts_only_what_ran_in_it_grouped_by_kind_and_table() -> None:
    upd = "UPDATE `user` SET `last_active_at` = ? WHERE `user` . `id` = ?"
    before = {"d1": (upd, 10), "d2": ("SELECT ? FROM `user`", 5)}
    after = {"d1": (upd, 13), "d2": ("SELECT ? FROM `user`", 5), "d3": ("SELECT `a` FROM `user`", 4),
             "d4": ("INSERT INTO `password` VALUES (...)", 2)}
    rows = rows_of(before, after)
    assert rows == [Row("select", "user", (), 4), Row("update", "user", ("last_active_at",), 3),
                    Row("insert", "password", (), 2)]
    s = Window(rows).summary("src")
    assert (s["reads"], s["writes"], s["source"], s["schema_tables"]) == (4, 5, "src", [])
    assert s["rows"][1] == {"kind": "update", "table": "user", "columns": ["last_active_at"], "statements": 3}


def test_the_schemas_tables_correct_digest_aliases_and_subquery_aliases() -> None:
    tables = {"user", "local_user", "password"}
    assert target("INSERT INTO SYSTEM_USER ( `id` ) VALUES (...)", tables) == ("insert", "user", ())
    assert target("UPDATE `system_user` SET `last_active_at` = ? WHERE `system_user` . `id` = ?",
                  tables) == ("update", "user", ("last_active_at",))
    assert target("SELECT `anon_1` . `a` FROM ( SELECT `local_user` . `id` FROM `local_user` ) AS "
                  "`anon_1`", tables) == ("select", "local_user", ())
    assert target("SELECT ? FROM `nowhere`", tables) == ("select", "nowhere", ())  # kept when none fits
