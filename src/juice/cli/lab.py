"""``juice lab``: bring sites and their WAN up, check them, cut and heal links, tear down."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from pydantic import TypeAdapter
from rich.table import Table

from juice.cli.common import err, out, progress
from juice.errors import UserError
from juice.lab import local as locallab
from juice.lab import spec as specmod
from juice.lab.check import check as run_check
from juice.lab.local import LocalLab
from juice.spec.base import JitterMs, OneWayMs, Percent, SiteCount
from juice.util import atomic
from juice.util.jsontypes import as_object
from juice.util.validation import check_option

lab_app = typer.Typer(help="The lab: N sites (network namespaces) with an emulated WAN.",
                      no_args_is_help=True)


def _lab_name(value: str) -> str:
    return specmod.check_name(value, "--name")


NAME_OPT = typer.Option("lab", "--name", "-n", help="Lab name (several labs may coexist).",
                        callback=_lab_name)
SITES = TypeAdapter(SiteCount)
ONE_WAY = TypeAdapter(OneWayMs)
JITTER = TypeAdapter(JitterMs)
PERCENT = TypeAdapter(Percent)


def _site(value: int | None) -> int | None:
    return None if value is None else check_option("SITE", value, SITES)


def _check_flags(sites: int | None, delay: float | None, jitter: float | None, loss: float | None,
                 zones: int | None, intra: float | None, inter: float | None) -> None:
    """Every given flag within its spec bounds (juice.spec.base), named in the error with the
    lab spec field it sets: click takes ``nan`` and ``inf`` for a float option."""
    for option, count in (("--sites (sites)", sites), ("--zones", zones)):
        if count is not None:
            check_option(option, count, SITES)
    for option, value, adapter in (("--delay (delay_ms)", delay, ONE_WAY),
                                   ("--intra (intra_zone_delay_ms)", intra, ONE_WAY),
                                   ("--inter (inter_zone_delay_ms)", inter, ONE_WAY),
                                   ("--jitter (jitter_ms)", jitter, JITTER),
                                   ("--loss (loss_pct)", loss, PERCENT)):
        if value is not None:
            check_option(option, value, adapter)


def _spec_from_flags(name: str, sites: int | None, delay: float | None, jitter: float | None,
                     loss: float | None, zones: int | None, intra: float | None, inter: float | None,
                     backend: str, spec_file: Path | None) -> specmod.LabSpec:
    _check_flags(sites, delay, jitter, loss, zones, intra, inter)
    if backend not in ("auto", "netem", "userspace"):
        raise UserError(f"--backend: expected auto, netem or userspace, got {backend!r}")
    if spec_file is not None:
        given = [f for f, v in (("--sites", sites), ("--delay", delay), ("--zones", zones),
                                ("--jitter", jitter), ("--loss", loss), ("--intra", intra),
                                ("--inter", inter)) if v is not None]
        if given:
            raise UserError(f"{given[0]}: give either --spec or flags, not both")
        data = specmod.load(spec_file).model_dump(mode="json", exclude_unset=True)
        if name != "lab":
            data["name"] = name
        if backend != "auto":
            data["backend"] = backend
        return specmod.parse(data, str(spec_file))
    if sites is None:
        raise UserError("--sites: how many sites? (e.g. `juice lab up --sites 3 --delay 50`)")
    flags: dict[str, object] = {"name": name, "sites": sites, "jitter_ms": jitter or 0.0,
                                "loss_pct": loss or 0.0, "backend": backend}
    if zones is not None:
        if delay is not None:
            raise UserError("--delay: with --zones give --intra and --inter instead")
        flags["zones"] = specmod.even_zones(sites, zones)
        flags["intra_zone_delay_ms"] = 0.0 if intra is None else intra
        flags["inter_zone_delay_ms"] = inter if inter is not None else 0.0
    else:
        if intra is not None or inter is not None:
            raise UserError("--intra/--inter: only with --zones K")
        flags["delay_ms"] = 0.0 if delay is None else delay
    return specmod.parse(flags, "flags")


@lab_app.command()
def up(
    sites: int = typer.Option(None, "--sites", "-s", help="Number of sites (1..250)."),
    delay: float = typer.Option(None, "--delay", "-d", help="Uniform ONE-WAY delay, ms (0..10000)."),
    jitter: float = typer.Option(None, "--jitter", help="Std deviation of the delay, ms "
                                 "(0..10000; default 0)."),
    loss: float = typer.Option(None, "--loss", help="Packet loss, percent (0..100; default 0)."),
    zones: int = typer.Option(None, "--zones", help="Split sites into K equal zones."),
    intra: float = typer.Option(None, "--intra", help="One-way ms inside a zone."),
    inter: float = typer.Option(None, "--inter", help="One-way ms between zones."),
    spec_file: Path = typer.Option(None, "--spec", help="YAML lab spec (zones, matrix...)."),
    backend: str = typer.Option("auto", help="auto | netem | userspace"),
    replace: bool = typer.Option(False, help="Tear down an existing lab of that name first."),
    name: str = NAME_OPT,
) -> None:
    """Create the sites and the WAN. Examples:

    juice lab up --sites 3 --delay 50          (uniform 50 ms one-way = 100 ms RTT)

    juice lab up --sites 9 --zones 3 --intra 10 --inter 75

    juice lab up --spec lab.yaml
    """
    lab_spec = _spec_from_flags(name, sites, delay, jitter, loss, zones, intra, inter, backend,
                                spec_file)
    locallab.require_root()
    lab = LocalLab.up(lab_spec, replace=replace, progress=progress)
    out.print(f"lab [bold]{lab.topo.name}[/bold] is up: {lab.topo.sites} sites, "
              f"backend {lab.state.backend}. Next: `juice lab check"
              f"{'' if name == 'lab' else ' --name ' + name}`")


@lab_app.command()
def status(name: str = NAME_OPT,
           as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show sites, addresses, the WAN and the delayer's queues. Exit 1 if unhealthy."""
    locallab.require_root()
    lab = LocalLab.get(name)
    h = lab.health()
    if as_json:
        out.print_json(json.dumps(h | {"spec": lab.state.spec}))
    else:
        t = Table(title=f"lab {name} ({h['backend']})")
        for col in ("site", "namespace", "address", "partitioned"):
            t.add_column(col)
        for s in lab.sites:
            t.add_row(str(s), lab.site_ns(s), lab.site_ip(s),
                      "yes" if s in lab.state.partitioned else "")
        out.print(t)
        _print_matrix(lab)
        stats = h["wan_stats"]
        if stats:
            tot = as_object(stats.get("totals"))
            out.print(f"delayer: held {tot.get('depth', 0)} packets (max {tot.get('max_depth', 0)}),"
                      f" {tot.get('accepted', 0)} forwarded, {tot.get('dropped_loss', 0)} lost "
                      f"by spec, {tot.get('dropped_overflow', 0)} dropped by overload")
        if h["missing_namespaces"]:
            out.print(f"[red]missing namespaces:[/red] {', '.join(h['missing_namespaces'])}")
        if not h["delayer_running"]:
            out.print("[red]the WAN delayer is not running[/red]: traffic between delayed "
                      "sites is dropped; `juice lab up --replace` rebuilds the lab")
    if not h["healthy"]:
        raise typer.Exit(1)


def _print_matrix(lab: LocalLab) -> None:
    t = Table(title="one-way delay, ms (row = from, column = to)")
    t.add_column("")
    for d in lab.sites:
        t.add_column(str(d), justify="right")
    for s in lab.sites:
        t.add_row(str(s), *("-" if s == d else f"{lab.links[(s, d)].delay_ms:g}"
                            for d in lab.sites))
    out.print(t)


@lab_app.command("check")
def check_cmd(
    name: str = NAME_OPT,
    probes: int = typer.Option(30, help="Probes per pair."),
    tol_ms: float = typer.Option(0.5, "--tolerance-ms", help="Absolute RTT tolerance, ms."),
    tol_pct: float = typer.Option(2.0, "--tolerance-pct", help="Relative RTT tolerance, %."),
    save: Path = typer.Option(None, "--save", help="Also write the report as JSON here."),
) -> None:
    """Measure every pair's RTT; exit 0 when all are within tolerance, 1 otherwise."""
    if probes < 1 or probes > 10_000:
        raise UserError("--probes: must be between 1 and 10000")
    check_option("--tolerance-ms", tol_ms, ONE_WAY)
    check_option("--tolerance-pct", tol_pct, PERCENT)
    locallab.require_root()
    lab = LocalLab.get(name)
    rep = run_check(lab, probes=probes, tol_ms=tol_ms, tol_pct=tol_pct)
    t = Table(title=f"lab {name}: RTT (round trip, ms) over {probes} probes per pair")
    for col in ("pair", "expected", "median", "p99", "recv", "tolerance", "result"):
        t.add_column(col, justify="right")
    for p in rep.pairs:
        t.add_row(f"{p.a}-{p.b}", f"{p.expected_rtt_ms:g}",
                  "-" if p.median_rtt_ms is None else f"{p.median_rtt_ms:.3f}",
                  "-" if p.p99_rtt_ms is None else f"{p.p99_rtt_ms:.3f}",
                  f"{p.received}/{p.sent}", f"±{p.tolerance_ms:g}",
                  ("[green]pass[/green]" if p.ok else "[red]FAIL[/red]")
                  + (" (partitioned)" if p.partitioned else "")
                  + (f" (2nd round; 1st {p.first_round_median_ms:.3f})"
                     if p.first_round_median_ms is not None else ""))
    out.print(t)
    if save is not None:
        atomic.write_json(save, rep.to_dict())
    bad = sum(not p.ok for p in rep.pairs)
    flaky = sum(p.intermittent for p in rep.pairs)
    out.print(f"{len(rep.pairs) - bad}/{len(rep.pairs)} pairs within tolerance "
              f"({rep.duration_s:.1f} s)" + (f"; {flaky} only on a second round (intermittent: its first "
                                             "round was late by what a busy host explains)" if flaky else ""))
    if bad:
        raise typer.Exit(1)


@lab_app.command()
def down(name: str = NAME_OPT,
         all_labs: bool = typer.Option(False, "--all", help="Every lab and every juice- "
                                       "namespace, known or not.")) -> None:
    """Remove the lab: its servers, delayer, namespaces and work files."""
    locallab.require_root()
    if all_labs:
        locallab.down_all(progress)
        return
    from juice.lab import state

    with state.locked():  # stale labs were already swept by the root command
        st = state.load(name)
        if st is None:
            err.print(f"lab {name!r} is not up: nothing to remove")
            return
        locallab.destroy(st, progress)


@lab_app.command()
def sweep() -> None:
    """Remove leftovers of crashed or killed runs and tests (every juice command does this
    first); labs made with `juice lab up` are kept."""
    locallab.require_root()
    from juice.lab import state

    with state.locked():
        removed = locallab.sweep(progress)
    out.print(f"removed {len(removed)} stale lab(s)" if removed else "no stale labs left")


@lab_app.command()
def partition(site: int = typer.Argument(..., help="Site to cut off."), name: str = NAME_OPT) -> None:
    """Cut SITE off from every other site (both directions) until `juice lab heal`."""
    _site(site)
    locallab.require_root()
    LocalLab.get(name).partition(site)
    out.print(f"site {site} is cut off; `juice lab heal {site}` reconnects it")


@lab_app.command()
def heal(site: int = typer.Argument(None, help="Site to reconnect (default: all)."),
         name: str = NAME_OPT) -> None:
    """Reconnect a partitioned site (or all of them)."""
    _site(site)
    locallab.require_root()
    LocalLab.get(name).heal(site)
    out.print("healed" if site is None else f"site {site} reconnected")


@lab_app.command("set-wan")
def set_wan(spec_file: Path = typer.Argument(..., help="YAML lab spec with the new WAN."),
            name: str = NAME_OPT) -> None:
    """Change delays/jitter/loss of a running lab without dropping traffic in flight."""
    locallab.require_root()
    lab = LocalLab.get(name)
    data = specmod.load(spec_file).model_dump(mode="json", exclude_unset=True)
    data["name"] = name
    lab.set_wan(specmod.parse(data, str(spec_file)))
    _print_matrix(lab)


@lab_app.command("exec", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True})
def exec_cmd(ctx: typer.Context, site: int = typer.Argument(..., help="Site number."),
             name: str = NAME_OPT) -> None:
    """Run a command inside a site: `juice lab exec 2 -- ping -c3 10.210.1.2`."""
    import os

    _site(site)
    locallab.require_root()
    lab = LocalLab.get(name)
    if not ctx.args:
        raise UserError("command: give the command after `--`")
    sys.stdout.flush()
    os.execvp("ip", ["ip", "netns", "exec", lab.site_ns(site), *ctx.args])
