"""Keystone's knobs (``KeystoneOptions``, re-exported by ``juice.services.openstack.keystone``), what
Keystone runs with that differs from Keystone 30's, oslo.db's, oslo.cache's and gunicorn's
defaults, and the database connections its pools may open.

    keystone_deviations(KeystoneOptions(workers=2))   # [Deviation(...), ...]
    db_connections(KeystoneOptions(), sites=45)       # 45 x 1 x (5 + 50)
"""

from __future__ import annotations

from dataclasses import dataclass

from juice.errors import UserError
from juice.services.deviations import SPEC, Deviation, dev, spec_set

CACHE_BACKEND = "dogpile.cache.pymemcache"
GUNICORN_TIMEOUT = ("--timeout", "300", "30",
                    "a request can outlast 30 s under high load (bcrypt, WAN round trips to the "
                    "database): gunicorn would kill the worker in the middle of it")
GUNICORN_GRACE = ("--graceful-timeout", "10", "30", "a lab's stop does not wait 30 s per server")


@dataclass(frozen=True)
class KeystoneOptions:
    """Knobs of a Keystone deployment. Invalid values raise UserError naming the field."""

    cache: bool = True                  # a memcached per site + Keystone [cache] enabled
    workers: int = 1                    # gunicorn workers per site
    password_hash_rounds: int = 12      # [identity] password_hash_rounds (bcrypt cost; Keystone's default)
    token_expiration_s: int = 3600      # [token] expiration
    sites: tuple[int, ...] | None = None  # sites running a Keystone (default: every site)
    access_log: bool = False            # gunicorn's access log (one line per request) in the site's log
    max_pool_size: int | None = None    # [database] max_pool_size (None: oslo.db's 5)
    max_overflow: int | None = None     # [database] max_overflow (None: oslo.db's 50)
    prewarm: bool = True                # requests until each worker's first full GC (keystone_warm)
    prewarm_sites: tuple[int, ...] | None = None  # the sites pre-warmed (default: every Keystone site)
    db_site: int | None = None          # every Keystone writes through this site's database node
    #                                     (one writer on Galera); None: each through its own site's

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= 64:
            raise UserError(f"workers: expected 1..64 gunicorn workers per site, got {self.workers}")
        if self.max_pool_size is not None and not 1 <= self.max_pool_size <= 1000:
            raise UserError(f"max_pool_size: expected 1..1000 connections, got {self.max_pool_size}")
        if self.max_overflow is not None and not -1 <= self.max_overflow <= 1000:
            raise UserError(f"max_overflow: expected -1..1000 connections, got {self.max_overflow}")
        if not 4 <= self.password_hash_rounds <= 31:
            raise UserError(f"password_hash_rounds: bcrypt accepts 4..31, got {self.password_hash_rounds}")
        if self.token_expiration_s < 60:
            raise UserError(f"token_expiration_s: expected >= 60 s, got {self.token_expiration_s}")
        if self.sites is not None and not self.sites:
            raise UserError("sites: give at least one site (or leave it unset for every site)")


OSLO_DB_POOL = 5       # oslo.db's [database] max_pool_size
OSLO_DB_OVERFLOW = 50  # oslo.db's [database] max_overflow
DEFAULT_HASH_ROUNDS = 12  # bcrypt's, what Keystone uses when unset


def keystone_deviations(opts: KeystoneOptions) -> list[Deviation]:
    """What Keystone runs with that differs from Keystone 30's, oslo's and gunicorn's defaults."""
    out = [dev("keystone gunicorn", o, v, d, why) for o, v, d, why in (GUNICORN_TIMEOUT, GUNICORN_GRACE)]
    if opts.workers != 1:
        out.append(spec_set("keystone gunicorn", "--workers", opts.workers, 1, "keystone.workers"))
    if opts.cache:
        out.append(dev("keystone", "[cache] enabled", True, False,
                       "a memcached per site, as devstack and kolla deploy Keystone (the spec's "
                       "keystone.cache turns it off)", SPEC))
        out.append(dev("keystone", "[cache] backend", CACHE_BACKEND, "dogpile.cache.null",
                       "goes with [cache] enabled", SPEC))
    if opts.password_hash_rounds != DEFAULT_HASH_ROUNDS:
        out.append(spec_set("keystone", "[identity] password_hash_rounds", opts.password_hash_rounds,
                            DEFAULT_HASH_ROUNDS, "cheaper bcrypt: the load driver creates users"))
    if opts.token_expiration_s != 3600:
        out.append(spec_set("keystone", "[token] expiration", opts.token_expiration_s, 3600))
    if opts.max_pool_size is not None and opts.max_pool_size != OSLO_DB_POOL:
        out.append(spec_set("keystone", "[database] max_pool_size", opts.max_pool_size, OSLO_DB_POOL))
    if opts.max_overflow is not None and opts.max_overflow != OSLO_DB_OVERFLOW:
        out.append(spec_set("keystone", "[database] max_overflow", opts.max_overflow, OSLO_DB_OVERFLOW))
    return out


def db_connections(opts: KeystoneOptions, sites: int) -> int:
    """The most database connections Keystone's pools may open: sites x workers x (pool +
    overflow) (each gunicorn worker has its own pool)."""
    pool = opts.max_pool_size if opts.max_pool_size is not None else OSLO_DB_POOL
    over = opts.max_overflow if opts.max_overflow is not None else OSLO_DB_OVERFLOW
    return sites * opts.workers * (pool + max(over, 0))
