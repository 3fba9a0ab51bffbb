"""Which log files share a clock, and why: the clocks skew correction solves for.

    cmap, why = assign(files, explicit={"nova-compute-7": "host7"}, run_sites=run_clocks(run))
    parse_clock_args(["api,conductor=ctl", "clocks.yaml"])     # the CLI's --clock values

A stream is a log file's stem (``nova-compute.log`` → ``nova-compute``). Its clock is, first
match wins:

1. ``--clock``: ``STREAM=CLOCK`` (``STREAM`` may be a comma list: ``api,conductor=ctl``), or a
   YAML/JSON file mapping each clock (a host) to its files: ``{ctl: [nova-api.log, …]}``;
2. a Juice run's manifest: every site is one host;
3. oslo.log JSON records' ``hostname`` field (the machine that wrote the file): files written on
   one host share its clock;
4. otherwise the file is its own clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

from juice.errors import UserError

HEAD_BYTES = 256 << 10    # how far into a file its JSON records are looked for a hostname


def stream_of(path: Path) -> str:
    return path.name.split(".")[0]


def json_hostname(path: Path) -> str | None:
    """The ``hostname`` of the first oslo.log JSON record in a file's head (None: text logs)."""
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    for raw in head.splitlines():
        if not raw.startswith(b"{") or b'"hostname"' not in raw:
            continue
        try:
            d = json.loads(raw)
        except ValueError:
            continue
        h = d.get("hostname") if isinstance(d, dict) else None
        if isinstance(h, str) and h:
            return h
    return None


def assign(files: Sequence[Path], explicit: Mapping[str, str] | None = None,
           run_sites: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """stream → clock, and stream → why (what grouped it so)."""
    cmap: dict[str, str] = {}
    why: dict[str, str] = {}
    for f in files:
        s = stream_of(f)
        if explicit and s in explicit:
            cmap[s], why[s] = explicit[s], "--clock"
        elif run_sites and s in run_sites:
            cmap[s], why[s] = run_sites[s], f"Juice run: {run_sites[s]} is one host"
        elif (h := json_hostname(f)) is not None:
            cmap[s], why[s] = f"host:{h}", f"JSON hostname {h}"
        else:
            cmap[s], why[s] = s, "own file (text log, no --clock)"
    return cmap, why


def parse_clock_args(values: Iterable[str]) -> dict[str, str]:
    """--clock values → stream → clock (``STREAM[,STREAM…]=CLOCK`` or a host → files file)."""
    m: dict[str, str] = {}
    for v in values:
        if "=" in v:
            k, c = (x.strip() for x in v.split("=", 1))
            names = [x.strip() for x in k.split(",") if x.strip()]
            if not names or not c:
                raise UserError(f"--clock: expected STREAM=CLOCK, got {v!r} "
                                "(e.g. --clock nova-compute-7=host7)")
            for n in names:
                m[stream_of(Path(n))] = c
            continue
        p = Path(v)
        if not p.is_file():
            raise UserError(f"--clock: {v!r} is neither STREAM=CLOCK nor a YAML/JSON file "
                            "(e.g. --clock nova-compute-7=host7, or --clock clocks.yaml)")
        try:
            data = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise UserError(f"--clock {v}: not YAML/JSON ({e.__class__.__name__}); write "
                            "'host: [file, …]' per clock") from None
        if not isinstance(data, dict) or not all(isinstance(fs, list | str) for fs in data.values()):
            raise UserError(f"--clock {v}: expected a mapping host → list of files, e.g. "
                            "'ctl: [nova-api.log, nova-conductor.log]'")
        for host, fs in data.items():
            for n in [fs] if isinstance(fs, str) else fs:
                m[stream_of(Path(str(n)))] = str(host)
    return m


def check_known(explicit: Mapping[str, str], streams: Iterable[str]) -> None:
    """A --clock naming no file is a typo: say so (one line, the files there are)."""
    known = set(streams)
    unknown = sorted(set(explicit) - known)
    if unknown:
        shown = ", ".join(sorted(known)[:12]) + (" …" if len(known) > 12 else "")
        raise UserError(f"--clock: no log file named {', '.join(unknown)} (files by stem: {shown})")


def table_rows(run: str, files: Sequence[Path], cmap: Mapping[str, str], why: Mapping[str, str]
               ) -> list[dict[str, str]]:
    """One row per file: its clock, why, and the other files on that clock."""
    members: dict[str, list[str]] = {}
    for f in files:
        members.setdefault(cmap[stream_of(f)], []).append(stream_of(f))
    return [{"run": run, "stream": stream_of(f), "file": f.name, "clock": cmap[stream_of(f)],
             "why": why[stream_of(f)],
             "shares_with": ",".join(x for x in members[cmap[stream_of(f)]] if x != stream_of(f))}
            for f in files]
