"""This host's run-to-run variation, measured by A/A runs and stored with the host's facts.

    entries = measure(units([Path("results/quickstart-calibration")]), fresh=True)
    store = Store.load()                           # /var/lib/juice/calibration/<host>.json
    store.add(entries); store.save()
    sp = store.spread("keystone", config, "atomic:keystone_v3.validate_token", "mean")
    sp.cv, sp.df, sp.source                       # 0.071, 5, "calibration of 2026-11-27 (6 runs ...)"

A calibration entry is the spread of one statistic (``mean`` or ``p95`` of one measured sample,
``juice.results.samples``) between runs of ONE configuration: its CV (SD of the runs' statistic
over their mean), SD, degrees of freedom (runs - 1), whether every run had a deployment of its
own (``fresh``: the variation between two result sets made apart; else runs on one
deployment), when and from which results. ``juice calibrate`` makes them; ``juice compare``,
``juice trend``, the reports' findings and SLA confidence use them where a side has too few
runs to show its own spread (``juice.analysis.runlevel``), and ``juice plan`` turns them into
the repetitions a spec needs to detect a given change.

**Which entry is used.** The one measured on the same configuration (workload and parameters,
identity fields left out, as ``juice trend`` groups runs) when there is one; otherwise, for the
same workload, the LARGEST CV among its configurations (conservative) — the source says which.
A newer entry for the same configuration and statistic replaces the older one.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from juice.analysis.runlevel import Spread, spread_of, stat_of
from juice.compare.metadata import FAILURE, config_of, values_of
from juice.errors import UserError
from juice.results.samples import Unit
from juice.util.jsontypes import JSONObject, as_object, get_in

FORMAT = 1
STATS = ("mean", "p95")


def default_dir() -> Path:
    return Path(os.environ.get("JUICE_CALIBRATION_DIR", "/var/lib/juice/calibration"))


@dataclass(frozen=True)
class Entry:
    workload: str
    config: dict[str, str]
    metric: str
    stat: str
    cv: float
    sd: float
    mean: float
    runs: int
    fresh: bool  # each run on a deployment of its own
    measured_at: str
    results: str

    @property
    def df(self) -> int:
        return self.runs - 1

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config.items()
                         if k != "workload" and v not in ("null", "None")) or "-"

    def spread(self, note: str = "") -> Spread:
        where = "fresh deployments" if self.fresh else "one deployment"
        return Spread(self.cv, self.df, f"calibration of {self.measured_at[:10]} ({self.runs} runs, "
                                        f"{where}{note})", self.sd)


def config_key(config: Mapping[str, str]) -> str:
    return json.dumps(dict(config), sort_keys=True)


def measure(units: Sequence[Unit], fresh: bool, results: str = "") -> list[Entry]:
    """Entries for every configuration with >= 2 runs among ``units``, every metric × stat."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    groups: dict[str, tuple[dict[str, str], list[Unit]]] = {}
    for u in units:
        cfg = config_of(u)
        groups.setdefault(config_key(cfg), (cfg, []))[1].append(u)
    out: list[Entry] = []
    for cfg, runs in groups.values():
        if len(runs) < 2:
            continue
        metrics = sorted({m for u in runs for m, v in u.samples.items() if len(v) >= 2})
        if all(u.iterations for u in runs):
            metrics.append(FAILURE)
        for metric in metrics:
            for stat in (("mean",) if metric == FAILURE else STATS):
                vals = [stat_of(values_of(u, metric), stat) for u in runs]
                sp = spread_of(vals, "")
                if sp is None or sp.df + 1 < 2:
                    continue
                mean = sum(v for v in vals if v == v) / max(1, sum(1 for v in vals if v == v))
                out.append(Entry(str(cfg.get("workload")), cfg, metric, stat, sp.cv, sp.sd, mean,
                                 sp.df + 1, fresh, now, results))
    return out


@dataclass
class Store:
    """The calibration entries of one host, in one JSON file."""

    path: Path
    host: JSONObject
    entries: list[Entry]

    @classmethod
    def load(cls, host: str | None = None, directory: Path | None = None) -> Store:
        name = host or platform.node() or "localhost"
        path = (directory or default_dir()) / f"{name}.json"
        if not path.is_file():
            return cls(path, {"hostname": name}, [])
        try:
            doc = json.loads(path.read_text())
            entries = [Entry(**{k: v for k, v in e.items() if k in Entry.__dataclass_fields__})
                       for e in doc.get("entries", [])]
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise UserError(f"{path}: unreadable calibration ({e}); remove it and run juice calibrate "
                            "again") from None
        return cls(path, as_object(doc.get("host")) or {"hostname": name}, entries)

    def add(self, new: Iterable[Entry]) -> None:
        new = list(new)
        replaced = {(config_key(e.config), e.metric, e.stat) for e in new}
        self.entries = [e for e in self.entries
                        if (config_key(e.config), e.metric, e.stat) not in replaced] + new

    def save(self) -> None:
        from juice.results.store import host_facts
        from juice.util import atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.path, {"format": FORMAT, "host": {**self.host, **host_facts()},
                                      "entries": [asdict(e) for e in self.entries]})

    def spread(self, workload: str, config: Mapping[str, str] | None, metric: str,
               stat: str) -> Spread | None:
        """The spread to use for ``metric`` × ``stat`` of ``workload`` (see the module)."""
        cands = [e for e in self.entries if e.workload == workload and e.metric == metric
                 and e.stat == stat and e.runs >= 2]
        if not cands:
            return None
        if config is not None:
            same = [e for e in cands if config_key(e.config) == config_key(config)]
            if same:
                return max(same, key=lambda e: e.measured_at).spread()
        worst = max(cands, key=lambda e: (e.cv if e.cv == e.cv else -1.0))
        return worst.spread(f"; measured on {worst.label}, the largest of {len(cands)}")


MAIN_METRICS = ("iteration", "nova_boot_s", "boot_s", "call_s", "oneway_s", "read_s")


def advice(store: Store, workload: str, repetitions: int,
           effects: Sequence[float] = (0.10, 0.20)) -> list[str]:
    """What ``juice plan`` says about repetitions: per main metric this host has calibrated
    for ``workload`` (its mean; the largest CV among its configurations), how many runs a side
    detect each change in ``effects`` (α = 0.05, power 0.8)."""
    from juice.analysis.runlevel import runs_needed

    out = []
    for metric in MAIN_METRICS:
        sp = store.spread(workload, None, metric, "mean")
        if sp is None or not math.isfinite(sp.cv) or sp.cv <= 0:
            continue
        need = []
        for e in effects:
            n = runs_needed(sp.cv, e)
            need.append(f"{e:.0%} of {metric} mean: {'> 200' if n is None else n} runs a side")
        out.append(f"{'; '.join(need)} (run-to-run CV {sp.cv:.1%}, {sp.source}); this spec has "
                   f"repetitions={repetitions}")
    return out


def spread_for(store: Store | None, units: Sequence[Unit], metric: str, stat: str) -> Spread | None:
    """The calibrated spread for a side's runs (their shared configuration when they have one)."""
    if store is None or not units:
        return None
    configs = {config_key(config_of(u)): config_of(u) for u in units}
    config = next(iter(configs.values())) if len(configs) == 1 else None
    return store.spread(units[0].workload, config, metric, stat)


def host_of(units: Iterable[Unit]) -> str | None:
    """The host the runs were measured on (their manifests' ``host.hostname``), when one."""
    names = {str(h) for u in units if (h := get_in(u.meta, "host", "hostname"))}
    return next(iter(names)) if len(names) == 1 else None
