"""``juice compare``: metadata first, Δ with intervals, Holm-corrected verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

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


def test_a_shift_is_real_and_the_same_data_is_noise() -> None:
    rng = np.random.default_rng(7)
    a = rng.gamma(4.0, 0.01, 400)
    same = compare({"A": [_unit("a", a)], "B": [_unit("a", a.copy())]})
    assert {d.verdict for d in same} == {"within noise"} and all(d.lo <= 0 <= d.hi for d in same)
    shifted = compare({"A": [_unit("a", a)], "B": [_unit("b", a + 0.05)]})
    assert {d.verdict for d in shifted} == {"real"}
    assert all(d.lo <= 0.05 <= d.hi for d in shifted)  # the interval covers the true shift


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
    # galera's commits cross the WAN: creating and updating users is slower at 50 ms, beyond noise
    ua, ub = units([a])[0], units([b])[0]
    (it,) = [d for d in compare({"A": [ua], "B": [ub]}) if d.metric == "iteration" and d.stat == "mean"]
    assert it.verdict == "real" and it.lo > 0
    assert it.delta == float(ub.samples["iteration"].mean() - ua.samples["iteration"].mean())
