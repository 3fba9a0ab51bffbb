"""The Keystone report's run-order and writes-by-table blocks, from stored manifests alone
(``juice.studies.keystone.runorder`` and ``writes``): the order effect is estimated only when a
point ran at two positions, an axis run always in the same order without repetition is said to
be confounded, older manifests (no order, no attribution) are simply left out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from juice.studies.keystone import runorder, writes


def manifest(run: str, delay: float, rep: int, position: int, index: int, mode: str = "as-written",
             rdbms: str = "mariadb", **extra: Any) -> dict[str, Any]:
    return {"_dir": run, "params": {"scenario": "KeystoneBasic.create_user_update_password",
                                    "rdbms": rdbms, "sites": 1, "delay_ms": delay, "load": "light",
                                    "cache": True, "repetition": rep, "seed": 1 + rep, "run_id": run},
            "order": {"mode": mode, "seed": 1, "position": position, "deployment": rdbms},
            "order_index": index, **extra}


def iterations(means: dict[str, float], n: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    rows = [{"run": r, "total_s": m + rng.normal(0, m * 0.02), "failed": False}
            for r, m in means.items() for _ in range(n)]
    return pd.DataFrame(rows)


def test_one_repetition_in_written_order_is_confounded_and_not_estimated() -> None:
    ms = [manifest("a", 0.0, 0, 0, 0), manifest("b", 50.0, 0, 1, 1)]
    table, found = runorder.effect(ms, iterations({"a": 0.15, "b": 0.13}))
    assert table.empty
    (f,) = found
    assert f.text.startswith("delay_ms is confounded with run order") and "0 ms ran before 50 ms" in f.text
    parts, _ = runorder.section(ms, iterations({"a": 0.15, "b": 0.13}))
    assert any("cannot be estimated" in p for p in parts)


def test_interleaved_repetitions_give_an_order_effect_and_no_confounding() -> None:
    # 0 ms: early at 0, late at 3; 50 ms: early at 1, late at 2; the first position is slower
    ms = [manifest("a0", 0.0, 0, 0, 0, "interleaved"), manifest("b0", 50.0, 0, 1, 1, "interleaved"),
          manifest("b1", 50.0, 1, 2, 2, "interleaved"), manifest("a1", 0.0, 1, 3, 3, "interleaved")]
    it = iterations({"a0": 0.20, "b0": 0.13, "b1": 0.13, "a1": 0.10})
    table, found = runorder.effect(ms, it)
    assert len(table) == 2 and set(table["early positions"]) == {"0", "1"}
    assert not any("confounded" in f.text for f in found)
    (f,) = found
    assert f.text.startswith("Order effect on the mariadb, 1 sites deployment: a point run late takes")
    assert "over 2 points" in f.text and "takes -" in f.text  # the first position was slower
    # one run a side: the per-point interval leaves out run-to-run variation, so no verdict there
    assert set(table["verdict"]) == {runorder.ONE_RUN}
    parts, _ = runorder.section(ms, it)
    assert any("gets no verdict of its own" in p for p in parts)


def test_a_point_with_two_runs_a_side_gets_its_own_verdict() -> None:
    ms = [manifest(f"a{k}", 0.0, k, k, k, "interleaved") for k in range(4)]
    it = iterations({"a0": 0.20, "a1": 0.21, "a2": 0.10, "a3": 0.11})
    table, _ = runorder.effect(ms, it)
    assert list(table["verdict"]) == ["real"] and table["early positions"].iloc[0] == "0, 1"
    parts, _ = runorder.section(ms, it)
    assert not any("gets no verdict of its own" in p for p in parts)


def test_the_order_effect_is_pooled_per_deployment_not_across_them() -> None:
    # seen in a quickstart with 2 interleaved repetitions: MariaDB's runs got faster with the
    # deployment's age, Galera's slower; pooled together they looked like no effect at all
    ms, means = [], {}
    for rdbms, first, later in (("mariadb", 0.20, 0.10), ("galera", 0.10, 0.20)):
        for delay, (pe, pl) in ((0.0, (0, 3)), (50.0, (1, 2))):
            for rep, pos in enumerate((pe, pl)):
                run = f"{rdbms}-{delay:g}-{rep}"
                ms.append(manifest(run, delay, rep, pos, pos, "interleaved", rdbms=rdbms))
                means[run] = first if rep == 0 else later
    _, found = runorder.effect(ms, iterations(means))
    by = {f.text.split(" deployment")[0]: f for f in found if f.text.startswith("Order effect on")}
    assert set(by) == {"Order effect on the mariadb, 1 sites", "Order effect on the galera, 1 sites"}
    assert all(f.verdict == "real" for f in by.values())
    assert "takes -" in by["Order effect on the mariadb, 1 sites"].text
    assert "takes -" not in by["Order effect on the galera, 1 sites"].text


def test_manifests_without_order_or_attribution_are_left_out() -> None:
    old = [{"_dir": "x", "params": {"scenario": "s", "rdbms": "mariadb"}, "rwratio": {"reads": 1}}]
    table, found = runorder.effect(old, iterations({"x": 0.1}))
    assert table.empty and found == []
    assert runorder.section(old, iterations({"x": 0.1})) == ([], [])
    assert writes.section(old) == ([], [])


def test_writes_by_table_are_means_per_run_with_their_share_and_the_seed_comparison() -> None:
    def wa(upd: int) -> dict[str, Any]:
        rows = [{"kind": "insert", "table": "password", "columns": [], "statements": 2},
                {"kind": "update", "table": "user", "columns": ["last_active_at"], "statements": upd},
                {"kind": "select", "table": "user", "columns": [], "statements": 60}]
        return {"source": "pg_stat_statements", "exact": True, "reads": 60, "writes": 2 + upd, "rows": rows}

    ms = [manifest("a", 0.0, 0, 0, 0, write_attribution=wa(2)),
          manifest("b", 0.0, 1, 1, 1, write_attribution=wa(6))]
    t = writes.writes_table(writes.frame(ms))
    upd = t[t["kind"] == "update"].iloc[0]
    assert (upd["table"], upd["columns"], upd["per run"], upd["runs"]) == ("user", "last_active_at", 4.0, 2)
    assert np.isclose(upd["% of writes"], (100 * 2 / 4 + 100 * 6 / 8) / 2)
    parts, found = writes.section(ms)
    assert "Writes by table" in parts[0] and "pg_stat_statements" in parts[1]
    (f,) = found
    seed = writes.SEED_PCT_WRITES["create_user_update_password"]
    at_seed = 60 * seed / (100 - seed)
    assert f"{seed:g}% in the seed" in f.text and f"come with {at_seed:.3g} writes" in f.text
    assert "update user (last_active_at) 4" in f.text
