"""``juice keystone``: real Keystone in every site of a running lab, on its database.

Register with ``app.add_typer(cli_keystone.keystone_app, name="keystone")``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from juice.cli.common import LAB_OPT, open_lab, out, progress, servers_table
from juice.errors import UserError
from juice.lab.local import LocalLab
from juice.services import kinds
from juice.services.base import ServerRecord, Service, stop_pid
from juice.services.openstack.keystone import Keystone, KeystoneOptions, children_of
from juice.util import atomic, proc

keystone_app = typer.Typer(help="Real Keystone (gunicorn) in every lab site, on the lab's database.",
                           no_args_is_help=True)
# (low, high) of each integer flag: gunicorn workers, bcrypt's cost range, a token lifetime
# from a minute to a year
BOUNDS = {"--workers": (1, 64), "--hash-rounds": (4, 31), "--token-expiration": (60, 365 * 86_400)}
RECORD = "keystone.json"
FLAGS = {"workers": "--workers", "password_hash_rounds": "--hash-rounds",
         "token_expiration_s": "--token-expiration"}


def load_record(workdir: Path) -> dict[str, Any] | None:
    """What ``juice keystone up`` started in this lab (None when nothing)."""
    return kinds.load_record(workdir, RECORD)


def write_record(workdir: Path, ks: Keystone, bringup_s: float,
                 extra: Sequence[ServerRecord] = ()) -> None:
    """Servers (with ``extra`` ones: the loopback forwarders), URLs and facts (no secret: the
    password is only in the 0600 openrc and clouds.yaml)."""
    atomic.write_json(workdir / RECORD, {
        "kind": ks.kind, "bringup_s": round(bringup_s, 2),
        "servers": [r.as_dict() for r in [*ks.records(), *extra]],
        "sites": {str(s): {"auth_url": ks.auth_url(s), "region": ks.region(s)} for s in ks.ks_sites},
        "openrc": str(ks.openrc), "facts": ks.facts(), "recorded_at": time.time(),
    })


def _database(lab: LocalLab, db_kind: str | None) -> Service:
    rec_db = kinds.attach(lab)
    if rec_db is not None:
        if db_kind is not None and db_kind != rec_db.kind:
            raise UserError(f"--db: lab {lab.state.name!r} already runs {rec_db.kind}, not {db_kind} "
                            f"(drop --db, or `juice db down --lab {lab.state.name}` first)")
        rec_db.wait_healthy()
        return rec_db
    if db_kind is None:
        raise UserError(f"--db: lab {lab.state.name!r} has no database: `juice db up --kind galera "
                        f"--lab {lab.state.name}` first, or pass --db KIND")
    kinds.check_kind(db_kind, "--db", buses=False)
    return kinds.deploy(lab, db_kind, progress)


def _prewarm_sites(text: str) -> tuple[int, ...] | None:
    """``--prewarm``: "all" (None: every site), "1,3", or "" (none: unused)."""
    if text.strip() in ("", "all"):
        return None
    try:
        sites = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--prewarm: expected 'all' or site numbers like '1,2', got {text!r}") from None
    if any(s < 1 for s in sites):
        raise UserError(f"--prewarm: site numbers start at 1, got {text!r}")
    return sites


@keystone_app.command()
def up(
    lab_name: str = LAB_OPT,
    db: str | None = typer.Option(None, "--db", help="Deploy this database first when the lab has none "
                                  f"({', '.join(kinds.KINDS)})."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="A memcached per site for Keystone's cache."),
    workers: int = typer.Option(1, "--workers", "-w", help="gunicorn workers per site (1..64)."),
    hash_rounds: int = typer.Option(12, "--hash-rounds",
                                    help="bcrypt rounds ([identity] password_hash_rounds, 4..31)."),
    token_expiration: int = typer.Option(3600, "--token-expiration",
                                         help="Token lifetime, seconds (60..31536000)."),
    publish: bool = typer.Option(False, "--publish", help="Reach it from this host as a user's cloud: "
                                 "loopback forwarders and a clouds.yaml (cloud juice-<lab>)."),
    access_log: bool = typer.Option(False, "--access-log", help="gunicorn's access log (a line per "
                                    "request) in each site's Keystone log."),
    prewarm: str = typer.Option("", "--prewarm", help="Sites whose workers get requests until their "
                                "first full garbage collection (a one-time ~0.15 s pause) before you "
                                "measure: 'all' or a list like '1,2' (default: none)."),
) -> None:
    """Start Keystone in every site (own gunicorn, shared Fernet keys, one region per site).

    juice keystone up --lab lab                 (on the database of `juice db up`)

    juice keystone up --db galera --no-cache --hash-rounds 4

    juice keystone up --publish                 (then: target: {cloud: juice-lab, clouds_file: ...})
    """
    for flag, value in (("--workers", workers), ("--hash-rounds", hash_rounds),
                        ("--token-expiration", token_expiration)):
        lo, hi = BOUNDS[flag]
        if not lo <= value <= hi:
            raise UserError(f"{flag}: expected {lo}..{hi}, got {value}")
    try:
        opts = KeystoneOptions(cache=cache, workers=workers, password_hash_rounds=hash_rounds,
                               token_expiration_s=token_expiration, access_log=access_log,
                               prewarm=bool(prewarm), prewarm_sites=_prewarm_sites(prewarm))
    except UserError as e:  # name the flag, not the dataclass field
        msg = str(e)
        for field, flag in FLAGS.items():
            msg = msg.replace(f"{field}:", f"{flag}:", 1) if msg.startswith(field) else msg
        raise UserError(msg) from None
    lab = open_lab(lab_name)
    if load_record(lab.workdir) is not None:
        raise UserError(f"--lab: lab {lab_name!r} already runs Keystone: "
                        f"`juice keystone down --lab {lab_name}` first")
    database = _database(lab, db)
    ks = Keystone(lab, database, progress, opts)
    t0 = time.monotonic()
    ks.up()
    try:
        extra = _publish(lab, ks) if publish else []
    except BaseException:
        ks.stop()
        raise
    write_record(lab.workdir, ks, time.monotonic() - t0, extra)
    _print_sites(load_record(lab.workdir) or {})
    out.print(f"keystone up on {database.kind} in {time.monotonic() - t0:.1f} s; admin credentials in "
              f"{ks.openrc} (`source` it inside a site); stop with `juice keystone down --lab {lab_name}`")
    if publish:
        out.print(f"published on loopback: {lab.workdir / 'clouds.yaml'} (cloud juice-{lab_name}); "
                  f"e.g. target: {{cloud: juice-{lab_name}, clouds_file: {lab.workdir / 'clouds.yaml'}}}")


def _publish(lab: LocalLab, ks: Keystone) -> list[ServerRecord]:
    """Loopback forwarders to every Keystone site and the lab's clouds.yaml; their records."""
    from juice.services.openstack import keystone_publish as pub
    from juice.services.openstack.keystone import PORT

    records: list[ServerRecord] = []
    sites: dict[int, tuple[int, str]] = {}
    try:
        for s in ks.ks_sites:
            srv, port = pub.start_forwarder(lab, s, PORT, lab.workdir)
            records.append(pub.forwarder_record(srv, s, port, PORT, lab.workdir))
            sites[s] = (port, ks.region(s))
    except BaseException:
        for r in records:
            stop_pid(r.pid, r.pid_start, grace_s=2)
        raise
    pub.write_clouds(lab.workdir, pub.clouds(lab.state.name, sites, ks.admin_credentials()))
    return records


def _print_sites(rec: dict[str, Any]) -> None:
    t = Table("site", "region", "auth url")
    for site, s in sorted(rec.get("sites", {}).items(), key=lambda kv: int(kv[0])):
        t.add_row(site, s["region"], s["auth_url"])
    out.print(t)


@keystone_app.command()
def status(lab_name: str = LAB_OPT) -> None:
    """Keystone's servers in the lab (alive or not), regions and URLs."""
    lab = open_lab(lab_name, root=False)
    rec = load_record(lab.workdir)
    if rec is None:
        out.print(f"no Keystone in lab {lab_name!r} (`juice keystone up --lab {lab_name}`)")
        return
    out.print(servers_table(rec["servers"]))
    _print_sites(rec)
    facts = rec.get("facts", {})
    out.print(f"keystone {facts.get('keystone_version')} on {facts.get('db_kind')}, "
              f"{facts.get('workers')} worker(s)/site, cache {'on' if facts.get('cache') else 'off'}, "
              f"password_hash_rounds {facts.get('password_hash_rounds')}")


@keystone_app.command()
def down(lab_name: str = LAB_OPT) -> None:
    """Stop Keystone (gunicorn: TERM, then KILL) and its memcacheds; the database stays."""
    lab = open_lab(lab_name)
    rec = load_record(lab.workdir)
    if rec is None:
        out.print(f"no Keystone in lab {lab_name!r}")
        return
    for s in rec["servers"]:
        if not proc.alive(s["pid"], s["pid_start"]):
            continue
        workers = children_of(s["pid"]) if s["kind"] == "keystone" else []
        stop_pid(s["pid"], s["pid_start"], grace_s=20)
        proc.terminate([w for w in workers if proc.alive(w)], grace_s=5)
        progress(f"{s['kind']} in site {s['site']} stopped")
    (lab.workdir / RECORD).unlink(missing_ok=True)
    (lab.workdir / "clouds.yaml").unlink(missing_ok=True)
    out.print(f"keystone stopped in lab {lab_name!r}")
