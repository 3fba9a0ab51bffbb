"""``CREATE DATABASE`` for the OpenStack services (Keystone, placement, nova) on Juice's
database services, MySQL-compatible or PostgreSQL, run from inside a site.

    create_database(lab, db, 1, "placement", progress)     # on Juice's MariaDB, from site 1
"""

from __future__ import annotations

from juice.errors import ServiceError
from juice.services.base import Progress, Service, Sites, from_site, quiet


def create_database(lab: Sites, db: Service, site: int, name: str, progress: Progress = quiet, *,
                    who: str = "nova and placement", drivers: tuple[str, ...] = ("mysql",)) -> None:
    """``CREATE DATABASE name`` (utf8mb4 on MySQL; owned by the admin user on PostgreSQL) on
    ``db`` as its admin user, from ``site``; ``who`` (the services using it) accepts ``drivers``."""
    ep = db.endpoint(site).write
    what = f"database {db.kind} ({ep.host}:{ep.port}) seen from site {site}"
    if ep.driver not in drivers:
        raise ServiceError(f"{what}: {who} cannot use a {ep.driver!r} database "
                           f"(supported: {', '.join(drivers)})")

    def create() -> None:
        if ep.driver == "postgresql":
            from juice.services import postgres

            pconn = postgres.connect(ep, timeout=10)
            try:
                if not pconn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                    pconn.execute(f"CREATE DATABASE {name} OWNER {ep.user}")
            finally:
                pconn.close()
            return
        from juice.services import mariadb

        conn = mariadb.connect(ep, timeout=10)
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
        finally:
            conn.close()

    try:
        from_site(lab, site, create, timeout=60)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ServiceError(f"{what} is not healthy: {first} (is `juice db up` done?)") from None
    progress(f"{who}: database {name!r} ready on {db.kind}")
