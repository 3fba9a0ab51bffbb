"""``juice hosts``: the hosts of a spec's ``provider:`` section (``juice hosts prepare``)."""

from __future__ import annotations

import math
import shlex
import time
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import TypeAdapter
from rich.table import Table

from juice.cli.common import err, out, progress
from juice.errors import LabError, UserError
from juice.hosts import offline as offl
from juice.hosts import prepare as prep
from juice.hosts.ssh import ssh_argv
from juice.lab.provider import Provider, StaticHost, check_sites, parse_provider, reserve
from juice.paths import cache_dir, work_dir
from juice.spec.base import SiteCount
from juice.util.validation import check_option

hosts_app = typer.Typer(help="The hosts of a spec's provider: section (SSH).", no_args_is_help=True)

SITES = TypeAdapter(SiteCount)
MAX_PARALLEL = 64
MAX_TIMEOUT_MIN = 24 * 60


@hosts_app.callback()
def _hosts() -> None:
    """The hosts of a spec's provider: section (SSH)."""


def clone_dir() -> Path:
    """The clone this Juice runs from (src layout: <clone>/src/juice)."""
    import juice

    return Path(juice.__file__).resolve().parents[2]


def read_provider(spec: Path) -> tuple[Any, Any]:
    """The ``provider:`` mapping of a spec file and its top-level ``sites`` (only those two keys
    are read: any study's spec), or a one-line UserError when there are no hosts to prepare."""
    try:
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{spec}: cannot read it ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UserError(f"{spec}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{spec}: expected a mapping (a spec file), got {type(data).__name__}")
    provider = data.get("provider")
    none = (f"{spec}: no hosts to prepare: every site runs in a namespace on this machine "
            "({}); prepare this machine with `sudo bash scripts/setup.sh`")
    if provider is None:
        raise UserError(none.format("no provider: section"))
    if isinstance(provider, dict) and provider.get("kind", "local") == "local":
        raise UserError(none.format("provider.kind: local"))
    return provider, data.get("sites")


def _count(p: Provider, sites: int | None, spec_sites: Any, spec: Path) -> int:
    """How many hosts: --sites, else static: every host listed; g5k/vagrant: the spec's
    ``sites`` (its largest value when a list)."""
    if sites is not None:
        n = check_option("--sites", sites, SITES)
    elif p.static is not None:
        n = len(p.static.hosts)
    else:
        values = spec_sites if isinstance(spec_sites, list) else [spec_sites]
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            raise UserError(f"{spec}: --sites: how many machines to reserve and prepare? (the spec has "
                            "no sites: with whole numbers)")
        n = check_option("sites", max(values), SITES)
    check_sites(p, n, "provider")
    return n


def _source(source_dir: Path | None, command: str | None) -> tuple[Path, list[str]]:
    src = (source_dir or clone_dir()).expanduser().resolve()
    if not src.is_dir():
        raise UserError(f"--source-dir {src}: not a directory")
    files = prep.tracked_files(src)
    if command is None and "scripts/setup.sh" not in files:
        raise UserError(f"--source-dir {src}: no tracked scripts/setup.sh: give a Juice clone")
    return src, files


def _run_dir(log_dir: Path | None) -> Path:
    root = (log_dir or work_dir() / "prepare").expanduser().resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i in range(100):  # bounded: a fresh directory per run
        d = root / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            d.mkdir(parents=True, exist_ok=False)
            return d
        except FileExistsError:
            continue
        except OSError as e:
            raise UserError(f"--log-dir {root}: cannot create {d} ({e.strerror or e})") from None
    raise UserError(f"--log-dir {root}: too many runs in the same second")


def _table(outcomes: list[prep.Outcome]) -> Table:
    t = Table("host", "result", "seconds")
    t.add_column("log", overflow="fold")
    for o in outcomes:
        result = "ok" if o.ok else f"FAILED at {o.step}: {o.why}"
        t.add_row(o.target.name, result, f"{o.seconds:.1f}", str(o.log))
    return t


def _details(outcomes: list[prep.Outcome]) -> None:
    """Per host, what was copied and how long each step took (setup.sh's own steps too)."""
    for o in outcomes:
        out.print(f"{o.target.name}: copied {o.copy_summary() or 'nothing'}; {o.step_summary()}",
                  markup=False, highlight=False, soft_wrap=True)
        if o.phases:
            out.print("  setup.sh: " + ", ".join(f"{w} {s:.0f} s" for w, s in o.phases),
                      markup=False, highlight=False, soft_wrap=True)


def _dry_run(p: Provider, n: int, src: Path, files: list[str], command: str | None,
             timeout_min: float, offline: bool) -> None:
    kh = Path("<log-dir>/known_hosts-K")
    hosts: list[Any] = list(p.static.hosts[:n]) if p.static is not None else [
        StaticHost(address=f"site-{k}") for k in range(1, n + 1)]
    if p.static is None:
        out.print(f"{n} machine(s) reserved through EnOSlib (site-K below is each one's address); "
                  f"released at the end unless provider.keep")
    out.print(f"source: {src} ({len(files)} tracked files), to the same path on every host; "
              f"JUICE_CACHE={cache_dir()}")
    bundle = f"{cache_dir()}/offline/<digest>"
    if offline:
        out.print(f"offline: here, JUICE_CACHE={cache_dir()} bash {src / offl.BUNDLE_SCRIPT} makes (once per "
                  f"digest of the locks) {bundle}, sent to the same path on every host", markup=False)
    for k, h in enumerate(hosts, 1):
        t = prep.Target(k, h)
        out.print(f"{t.name}:", markup=False)
        steps = [("check", ssh_argv(h, kh, prep.CHECK, address=h.address)),
                 ("copy, list", ssh_argv(h, kh, prep.list_command(str(src)), address=h.address)),
                 ("copy, send", [*prep.tar_argv(src), "|",
                                 *ssh_argv(h, kh, prep.untar_command(str(src)), address=h.address)])]
        if offline:
            steps.append(("bundle, send", [*prep.tar_argv(Path(bundle)), "|", *ssh_argv(
                h, kh, prep.untar_command(bundle), address=h.address)]))
        there = bundle if offline else None
        setup = prep.setup_command(str(src), cache_dir(), timeout_min * 60, command, there)
        steps.append(("setup", ssh_argv(h, kh, setup, address=h.address)))
        if command is None:
            steps.append(("verify", ssh_argv(h, kh, prep.verify_command(str(src), cache_dir(), there),
                                             address=h.address)))
        for name, argv in steps:
            out.print(f"  {name}: {shlex.join(argv)}".replace("'|'", "|"), markup=False, soft_wrap=True)


@hosts_app.command("prepare")
def prepare(
    spec: Path = typer.Argument(..., help="A spec with a provider: section (only provider: and sites: "
                                          "are read)."),
    sites: int | None = typer.Option(None, "--sites", help="How many hosts (site 1..N). Default: static: "
                                     "every listed host; g5k/vagrant: the spec's sites (largest)."),
    source_dir: Path | None = typer.Option(None, "--source-dir", help="The Juice clone whose tracked "
                                           "files go to the SAME path on the hosts and whose "
                                           "scripts/setup.sh runs there (default: this clone)."),
    log_dir: Path | None = typer.Option(None, "--log-dir", help="Where each run's directory (a log "
                                        "per host) is made (default /var/tmp/juice/prepare)."),
    timeout: float = typer.Option(60.0, "--timeout", help="Minutes setup.sh may take on a host."),
    parallel: int = typer.Option(10, "--parallel", help=f"Hosts prepared at once (1..{MAX_PARALLEL})."),
    command: str | None = typer.Option(None, "--command", help="Diagnostics: run this (bash -c) in "
                                       "the copied clone instead of scripts/setup.sh."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the commands per host; contact no host."),
    offline: bool = typer.Option(False, "--offline", help="The hosts reach no registry: bring everything "
                                 "setup.sh needs from here (scripts/offline-bundle.sh: the locked wheels, "
                                 "the Debian packages and their dependencies, the native helpers; made once "
                                 "per lock digest, needs root and this machine on Debian 12) and install "
                                 "from that only."),
    bundle_dir: Path | None = typer.Option(None, "--bundle", help="--offline with this bundle (made by "
                                           "scripts/offline-bundle.sh on another Debian 12 machine of the "
                                           "hosts' architecture, copied here; the same path on the "
                                           "hosts) instead of making one here."),
) -> None:
    """Copy this clone to every host of SPEC's provider: (same path) and run its
    scripts/setup.sh there, in parallel over ssh, then check each venv against its lock; a
    summary table (what was copied, seconds per step) at the end. Idempotent."""
    if not math.isfinite(timeout) or not 1 <= timeout <= MAX_TIMEOUT_MIN:
        raise UserError(f"--timeout: minutes from 1 to {MAX_TIMEOUT_MIN}, got {timeout}")
    if not 1 <= parallel <= MAX_PARALLEL:
        raise UserError(f"--parallel: from 1 to {MAX_PARALLEL}, got {parallel}")
    if command is not None and (not command.strip() or "\0" in command):
        raise UserError("--command: empty")
    data, spec_sites = read_provider(spec)
    try:
        p = parse_provider(data, 0, "provider")
        n = _count(p, sites, spec_sites, spec)
    except UserError as e:
        raise UserError(f"{spec}: {e}") from None
    src, files = _source(source_dir, command)
    if dry_run:
        _dry_run(p, n, src, files, command, timeout, offline or bundle_dir is not None)
        return
    run_dir = _run_dir(log_dir)
    bundle = None
    if bundle_dir is not None:
        try:
            bundle = offl.load_bundle(bundle_dir.expanduser().resolve())
        except UserError as e:
            raise UserError(f"--bundle: {e}") from None
        progress(f"offline bundle: {bundle.path}: {len(bundle.files)} files, {bundle.megabytes:.0f} MB")
    elif offline:
        bundle = offl.make_bundle(src, cache_dir(), progress, run_dir / "bundle.log")
    progress(f"preparing {n} host(s) from {src} ({len(files)} tracked files), JUICE_CACHE={cache_dir()}; "
             f"logs: {run_dir}")
    ctx = prep.Context(source=src, run_dir=run_dir, cache=cache_dir(), files=files,
                       setup_timeout_s=timeout * 60, command=command, progress=progress, bundle=bundle)
    with reserve(p, n, run_dir / "enoslib", progress) as hosts:  # g5k/vagrant: released unless keep
        outcomes = prep.prepare_all([prep.Target(k, h) for k, h in enumerate(hosts, 1)], ctx, parallel)
    out.print(_table(outcomes))
    _details(outcomes)
    failed = [o for o in outcomes if not o.ok]
    for o in failed:
        err.print(f"[red]{o.target.name}[/red]: last lines of {o.log}:", highlight=False)
        for line in o.tail():
            err.print(f"  {line}", markup=False, highlight=False)
    if failed:
        o = failed[0]
        more = f" (and {len(failed) - 1} more host(s): see the table)" if len(failed) > 1 else ""
        last = (o.tail(1) or [""])[0]
        raise LabError(f"{o.target.name}: {o.step} failed: {o.why}{more}; log: {o.log}"
                       + (f" (last line: {last.strip()})" if last and o.why not in last else ""))
    progress(f"{n} host(s) prepared in {max(o.seconds for o in outcomes):.0f} s")
