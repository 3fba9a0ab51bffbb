"""``juice compare``: metadata first, Δ with intervals, Holm-corrected verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from juice.analysis.runlevel import UNKNOWN
from juice.compare.calibration import Store, measure
from juice.compare.deltas import compare, holm
from juice.compare.metadata import differences
from juice.results.samples import Unit, units
from tests.sla.test_cli_sla import OLD, RALLY_FILE, juice


def _unit(name: str, values: np.ndarray, **params: object) -> Unit:
    return Unit(name, Path(name), "juice", samples={"iteration": values}, meta={"params": params})


def test_holm_matches_the_textbook_step_down() -> None:
    # p = (0.01, 0.04, 0.03, 0.005), m = 4: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1 -> running max
    assert holm([0.01, 0.04, 0.03, 0.005]) == [0.03, 0.06, 0.06, 0.02]
    assert math.isnan(holm([float("nan"), 0.5])[0]) and holm([float("nan"), 0.5])[1] == 0.5


def _runs(rng: np.random.Generator, k: int, shift: float, prefix: str) -> list[Unit]:
    """k runs, each with its own level (7 % run-to-run CV) plus ``shift``."""
    return [_unit(f"{prefix}{i}", rng.gamma(4.0, 0.01 * rng.normal(1.0, 0.07), 400) + shift)
            for i in range(k)]


def test_a_shift_is_real_and_the_same_data_is_noise() -> None:
    rng = np.random.default_rng(7)
    a = _runs(rng, 3, 0.0, "a")
    same = compare({"A": a, "B": list(a)})
    assert {d.verdict for d in same} == {"within noise"} and all(d.lo <= 0 <= d.hi for d in same)
    shifted = compare({"A": a, "B": _runs(rng, 3, 0.05, "b")})
    assert {d.verdict for d in shifted} == {"real"}
    assert {d.method for d in shifted} == {"runs (Welch t)"} and {d.runs for d in shifted} == {3}
    assert all(d.lo <= 0.05 <= d.hi for d in shifted)  # the interval covers the true shift


def test_one_run_a_side_gets_no_verdict_unless_the_host_is_calibrated(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    a, b = _runs(rng, 1, 0.0, "a"), _runs(rng, 1, 0.05, "b")
    rows = compare({"A": a, "B": b})
    assert {d.verdict for d in rows} == {UNKNOWN} and all(math.isnan(d.lo) for d in rows)
    # A/A runs of this configuration, measured once (juice calibrate) and stored for the host
    store = Store.load("h", tmp_path)
    store.add(measure(_runs(rng, 6, 0.0, "cal"), fresh=True))
    store.save()
    rows = compare({"A": a, "B": b}, calibration=Store.load("h", tmp_path))
    means = [d for d in rows if d.stat == "mean"]
    assert {d.verdict for d in means} == {"real"}
    assert all(d.method.startswith("calibration of ") and "6 runs" in d.method for d in means)
    # a run's p95 is heavy-tailed between runs: never judged one run a side (docs/verdicts.md)
    assert {d.verdict for d in rows if d.stat == "p95"} == {UNKNOWN}


def test_differing_parameters_come_first() -> None:
    diff = differences({"A": [_unit("a", np.ones(3), delay_ms=0.0, rdbms="galera")],
                        "B": [_unit("b", np.ones(3), delay_ms=50.0, rdbms="galera")]})
    assert diff == [("params.delay_ms", {"A": "0.0", "B": "50.0"})]


def test_cli_on_real_rally_and_old_juice_results() -> None:
    cp = juice("compare", str(RALLY_FILE), str(RALLY_FILE), "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["differs"] == [] and doc["deltas"] and doc["correction"] == "holm"
    assert {d["verdict"] for d in doc["deltas"]} == {"within noise"}
    a, b = (sorted(OLD.glob(f"create_user_update_password-galera-3s-{d}-*"))[0] for d in ("0ms", "50ms"))
    cp = juice("compare", str(a), str(b))
    assert cp.returncode == 0, cp.stderr
    first = cp.stdout.split("What differs")[1].splitlines()[1]
    assert first.strip() == "params.delay_ms: 0.0  vs  50.0"
    # one run a side: the run-to-run variation is unknown, so no verdict, and the CLI says why
    assert "without a verdict" in cp.stdout and "juice calibrate" in cp.stdout
    ua, ub = units([a])[0], units([b])[0]
    (it,) = [d for d in compare({"A": [ua], "B": [ub]}) if d.metric == "iteration" and d.stat == "mean"]
    assert it.verdict == UNKNOWN and it.runs_base == it.runs == 1
    assert it.delta == float(ub.samples["iteration"].mean() - ua.samples["iteration"].mean())
