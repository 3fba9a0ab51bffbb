"""``juice db``: deploy a real database into a running lab, show it, stop it."""

from __future__ import annotations

import re
import signal
from typing import Any

import typer
from rich.table import Table

from juice.cli.common import LAB_OPT, open_lab, out, progress, servers_table
from juice.errors import UserError
from juice.lab.spec import MAX_SITES
from juice.services import kinds as deploymod
from juice.services.base import stop_pid

db_app = typer.Typer(help="Real databases inside the lab sites (MariaDB, Galera, PostgreSQL...).",
                     no_args_is_help=True)
# --opt values that are numbers, with the range that makes sense (MiB, counts, a site)
INT_OPTS: dict[str, tuple[int, int]] = {
    "site": (1, MAX_SITES), "buffer_pool_mb": (8, 65_536), "gcache_mb": (1, 65_536),
    "slave_threads": (1, 64), "shared_buffers_mb": (1, 65_536), "max_connections": (1, 10_000),
    "sync_quorum": (0, MAX_SITES - 1)}
BOOL_OPTS = ("parallel_joins",)
NOT_FLAGS = ("sites", "segments", "provider_extra", "options", "read_local")  # not key=value material
INT_RE = re.compile(r"[0-9]+")


def _parse_opts(pairs: list[str]) -> dict[str, Any]:
    """``["gcache_mb=128", "sst=rsync"]`` -> typed options; one-line UserError naming ``--opt``."""
    opts: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p or not p.split("=", 1)[0].strip():
            raise UserError(f"--opt: expected key=value, got {p!r}")
        k, v = (x.strip() for x in p.split("=", 1))
        k = k.replace("-", "_")
        if k in opts:
            raise UserError(f"--opt: {k} is given twice")
        val: object = v
        if k in INT_OPTS:
            lo, hi = INT_OPTS[k]
            if not INT_RE.fullmatch(v) or not lo <= int(v) <= hi:
                raise UserError(f"--opt: {k}: expected an integer {lo}..{hi}, got {v!r}")
            val = int(v)
        elif k in BOOL_OPTS:
            if v.lower() not in ("true", "false"):
                raise UserError(f"--opt: {k}: expected true or false, got {v!r}")
            val = v.lower() == "true"
        elif k in NOT_FLAGS:
            raise UserError(f"--opt: {k} cannot be set from the command line")
        elif not v.isprintable():
            raise UserError(f"--opt: {k}: control characters in {v!r}")
        elif INT_RE.fullmatch(v):
            val = int(v)
        elif v.lower() in ("true", "false"):
            val = v.lower() == "true"
        opts[k] = val
    return opts


@db_app.command()
def up(
    kind: str = typer.Option(..., "--kind", "-k", help=f"One of: {', '.join(deploymod.ALL_KINDS)}."),
    lab_name: str = LAB_OPT,
    opt: list[str] = typer.Option([], "--opt", "-o",
                                  help="Service option key=value, e.g. sync_quorum=1, sst=rsync."),
) -> None:
    """Deploy a database into a running lab and print the endpoint each site should use.

    juice db up --kind galera --lab lab        (one node per site)

    juice db up --kind postgres-readlocal -o sync_quorum=1
    """
    deploymod.check_kind(kind, "--kind")
    opts = _parse_opts(opt)
    lab = open_lab(lab_name)
    rec = deploymod.load_record(lab.workdir)
    if rec is not None:
        raise UserError(f"--lab: lab {lab_name!r} already runs {rec['kind']}: "
                        f"`juice db down --lab {lab_name}` first")
    svc = deploymod.deploy(lab, kind, progress, **opts)
    rec = deploymod.load_record(lab.workdir) or {}
    _print_endpoints(rec)
    out.print(f"{kind} up in {rec.get('bringup_s', 0):.1f} s; stop it with `juice db down --lab {lab_name}`")
    del svc  # servers keep running inside the lab namespaces


def _print_endpoints(rec: dict[str, object]) -> None:
    t = Table("site", "read endpoint", "write endpoint")
    eps = rec.get("endpoints", {})
    assert isinstance(eps, dict)
    for site, e in sorted(eps.items(), key=lambda kv: int(kv[0])):
        r, w = e["read"], e["write"]
        t.add_row(site, f"{r['driver']}://{r['host']}:{r['port']} (site {r['site']})",
                  f"{w['driver']}://{w['host']}:{w['port']} (site {w['site']})")
    out.print(t)


@db_app.command()
def status(lab_name: str = LAB_OPT) -> None:
    """Which database runs in the lab, its servers (alive or not) and endpoints."""
    lab = open_lab(lab_name, root=False)
    rec = deploymod.load_record(lab.workdir)
    if rec is None:
        out.print(f"no database deployed in lab {lab_name!r} (`juice db up --kind ... --lab {lab_name}`)")
        return
    out.print(servers_table(rec["servers"]))
    _print_endpoints(rec)


@db_app.command()
def down(lab_name: str = LAB_OPT) -> None:
    """Stop the lab's database servers gracefully (their data goes with `juice lab down`)."""
    lab = open_lab(lab_name)
    rec = deploymod.load_record(lab.workdir)
    if rec is None:
        out.print(f"no database deployed in lab {lab_name!r}")
        return
    servers = rec["servers"]
    # Galera joiners / PostgreSQL standbys first, the bootstrap node / primary last.
    first = servers[0]["site"] if servers else 0
    for s in sorted(servers, key=lambda x: (x["site"] == first, x["site"])):
        sig = signal.SIGINT if s["kind"].startswith("postgres") else signal.SIGTERM
        stop_pid(s["pid"], s["pid_start"], sig=sig, grace_s=60)
        progress(f"{s['kind']} in site {s['site']} stopped")
    deploymod.forget(lab.workdir)
    out.print(f"{rec['kind']} stopped in lab {lab_name!r}")
