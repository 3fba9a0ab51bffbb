"""Connections to the study's stores, by endpoint dict (what crosses the process boundary to
the scheduler and updater workers): ``{"driver": "mysql"|"postgresql"|"memcached"|"redis",
"host", "port", "user", "password", "database"}``, plus for mysql an optional ``"client"``:
``"pymysql"`` (default, pure Python) or ``"mysqlclient"`` (the C MySQLdb).

SQL identifiers that are reserved words (``binary``, ``key``) go through ``qi``.
Connections are opened eagerly (caches too), by a worker process started in the client's
site (``worker.WorkerProc``: the site's namespace here, its host over ssh).
"""

from __future__ import annotations

from typing import Any

SQL_DRIVERS = ("mysql", "postgresql")
RESERVED = {"binary", "key"}


def qi(dialect: str, name: str) -> str:
    """Quote ``name`` when it is a reserved word in ``dialect``."""
    if name not in RESERVED:
        return name
    return f"`{name}`" if dialect == "mysql" else f'"{name}"'


def connect(ep: dict[str, Any], *, timeout: float = 600.0) -> Any:
    """An autocommit DB-API connection (PyMySQL or MySQLdb / psycopg 3) or a cache client."""
    driver = ep["driver"]
    if driver == "mysql" and ep.get("client", "pymysql") == "mysqlclient":
        import MySQLdb  # type: ignore[import-untyped]  # mysqlclient ships no type stubs

        kw: dict[str, object] = {"database": ep["database"]} if ep.get("database") else {}
        return MySQLdb.connect(host=ep["host"], port=int(ep["port"]), user=ep["user"],
                               password=ep["password"], connect_timeout=10, read_timeout=int(timeout),
                               write_timeout=int(timeout), autocommit=True, **kw)
    if driver == "mysql":
        if ep.get("client", "pymysql") != "pymysql":
            raise ValueError(f"client: unknown {ep['client']!r} (pymysql or mysqlclient)")
        import pymysql

        return pymysql.connect(host=ep["host"], port=int(ep["port"]), user=ep["user"],
                               password=ep["password"], database=ep.get("database") or None,
                               connect_timeout=10, read_timeout=int(timeout), write_timeout=int(timeout),
                               autocommit=True, max_allowed_packet=64 * 1024 * 1024)
    if driver == "postgresql":
        import psycopg

        return psycopg.connect(host=ep["host"], port=int(ep["port"]), user=ep["user"],
                               password=ep["password"], dbname=ep.get("database") or "postgres",
                               connect_timeout=10, autocommit=True)
    if driver == "memcached":
        from pymemcache.client.base import Client  # type: ignore[import-untyped]

        mc = Client((ep["host"], int(ep["port"])), connect_timeout=10, timeout=timeout, no_delay=True)
        mc.version()  # connect NOW (pymemcache is lazy): the socket must be made in this netns
        return mc
    if driver == "redis":
        import redis

        rc = redis.Redis(host=ep["host"], port=int(ep["port"]), socket_timeout=timeout,
                         socket_connect_timeout=10, single_connection_client=True)
        rc.ping()  # connect NOW (redis-py is lazy): the socket must be made in this netns
        return rc
    raise ValueError(f"driver: unknown {driver!r}")


def execute(conn: Any, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement; the rows it returned (empty for DML)."""
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []
    finally:
        cur.close()


def bulk_insert(conn: Any, dialect: str, table: str, cols: tuple[str, ...],
                rows: list[tuple[Any, ...]]) -> None:
    """Fast insert of ``rows``: COPY on PostgreSQL, multi-row INSERTs on MySQL (PyMySQL's
    ``executemany`` folds ``INSERT ... VALUES`` into statements of up to ~1 MB)."""
    if not rows:
        return
    names = ", ".join(qi(dialect, c) for c in cols)
    if dialect == "postgresql":
        with conn.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
        return
    cur = conn.cursor()
    try:
        cur.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(cols))})", rows)
    finally:
        cur.close()

