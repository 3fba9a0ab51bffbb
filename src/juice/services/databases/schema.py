"""``CREATE DATABASE`` for the OpenStack services (Keystone, placement, nova) on Juice's
database services, MySQL-compatible or PostgreSQL, run from inside a site (with the
``mariadb``/``psql`` client at the site's place).

    create_database(lab, db, 1, "placement", progress)     # on Juice's MariaDB, from site 1
"""

from __future__ import annotations

from juice.errors import ServiceError
from juice.services.base import Progress, Service, Sites, quiet

# the clients run at the site's place (a namespace here, a host there), as a client would
MYSQL = "/usr/bin/mariadb"
PSQL = "/usr/bin/psql"


def create_database(lab: Sites, db: Service, site: int, name: str, progress: Progress = quiet, *,
                    who: str = "nova and placement", drivers: tuple[str, ...] = ("mysql",)) -> None:
    """``CREATE DATABASE name`` (utf8mb4 on MySQL; owned by the admin user on PostgreSQL) on
    ``db`` as its admin user, from ``site``; ``who`` (the services using it) accepts ``drivers``."""
    ep = db.endpoint(site).write
    what = f"database {db.kind} ({ep.host}:{ep.port}) seen from site {site}"
    if ep.driver not in drivers:
        raise ServiceError(f"{what}: {who} cannot use a {ep.driver!r} database "
                           f"(supported: {', '.join(drivers)})")

    place = lab.place(site)
    if ep.driver == "postgresql":
        conninfo = f"host={ep.host} port={ep.port} user={ep.user} dbname=postgres connect_timeout=10"
        env = {"PGPASSWORD": ep.password}
        r = place.run([PSQL, conninfo, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],
                      timeout=60, env=env)
        if r.ok and r.out.strip() != "1":
            r = place.run([PSQL, conninfo, "-c", f"CREATE DATABASE {name} OWNER {ep.user}"],
                          timeout=60, env=env)
    else:
        r = place.run([MYSQL, "-h", ep.host, "-P", str(ep.port), "-u", ep.user, "--connect-timeout=10",
                       "-e", f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4"],
                      timeout=60, env={"MYSQL_PWD": ep.password})
    if not r.ok:
        lines = (r.err or r.out).strip().splitlines()
        raise ServiceError(f"{what} is not healthy: {lines[-1] if lines else 'no answer'} "
                           "(is `juice db up` done?)")
    progress(f"{who}: database {name!r} ready on {db.kind}")
