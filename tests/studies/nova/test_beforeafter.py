"""Before/after as one spec (``configurations``, issue 28): the run matrix alternates the
configurations within each repetition, each on its own deployment, and the report compares
them (failure %, retry %, throughput, boot median, with intervals) — from stored runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from juice.errors import UserError
from juice.studies.nova import beforeafter
from juice.studies.nova.points import expand
from juice.studies.nova.report import load
from juice.studies.nova.spec import parse


def spec(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"workload": "nova", "name": "ba", "scenarios": ["boot_server"],
                            "computes": {"processes": 1, "nodes_per_process": 4},
                            "server": {"rpc_response_timeout": 60}}
    data.update(over)
    return data


def test_configurations_alternate_per_repetition_each_on_its_own_deployment() -> None:
    after = {"max_overflow": 100, "rpc_response_timeout": 30}
    s = parse(spec(repetitions=2, runner={"times": 4, "concurrency": [2, 4]},
                   configurations={"before": {}, "after": after}), "ba")
    pts = expand(s)
    assert [(p.repetition, p.configuration) for p in pts] == [
        (0, "before"), (0, "before"), (0, "after"), (0, "after"),
        (1, "before"), (1, "before"), (1, "after"), (1, "after")]
    # the configuration's options on top of the spec's server options, in what deploys and keys
    assert pts[0].fixed["server"] == {"rpc_response_timeout": 60}
    assert pts[2].fixed["server"] == {"rpc_response_timeout": 30, "max_overflow": 100}
    assert pts[0].deployment_key != pts[2].deployment_key and pts[0].key != pts[2].key
    assert pts[0].params()["configuration"] == "before" and pts[0].dirname.startswith("before-")
    assert len({p.key for p in pts}) == len(pts)


def test_a_configuration_can_fix_the_deployment_axes_a_seed_changed() -> None:
    s = parse(spec(db=["galera"], sites=3, schedulers=[2], configurations={
        "before": {"galera_writers": "multi", "host_subset_size": 1, "max_pool_size": 5},
        "after": {"galera_writers": "single", "host_subset_size": 3, "max_pool_size": 100,
                  "max_overflow": 100}}), "ba")
    before, after = expand(s)
    assert (before.writers, before.host_subset_size, before.max_pool_size) == ("multi", 1, 5)
    assert (after.writers, after.host_subset_size, after.max_pool_size) == ("single", 3, 100)
    assert after.fixed["server"] == {"rpc_response_timeout": 60, "max_overflow": 100}  # no axis in server


def test_a_spec_without_configurations_keeps_its_points_and_keys() -> None:
    pts = expand(parse(spec(repetitions=2), "ba"))
    assert all(p.configuration == "" and "configuration" not in p.params() for p in pts)
    assert [p.repetition for p in pts] == [0, 1]


@pytest.mark.parametrize("confs,match", [
    ({"only": {}}, r"configurations: expected 2 to 8 named configurations"),
    ({"Before": {}, "after": {}}, r"configurations: 'Before': a configuration name is"),
    ({"before": {}, "after": {"max_overflo": 1}}, r"configurations\.after\.max_overflo: unknown key"),
    ({"before": {}, "after": {"rpc_response_timeout": 0}}, r"configurations\.after\.rpc_response_timeout"),
])
def test_bad_configurations_name_the_field(confs: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        parse(spec(configurations=confs), "ba")


def _run(root: Path, name: str, conf: str, ok: list[bool], boot_s: list[float], per_s: float,
         index: int) -> None:
    d = root / name
    d.mkdir(parents=True)
    params = {"study": "ba", "workload": "nova", "scenario": "NovaServers.boot_server", "concurrency": 4,
              "configuration": conf, "db": "mariadb", "schedulers": 1, "preload": 0, "times": len(ok),
              "repetition": 0, "delay_ms": 0.0}
    (d / "manifest.json").write_text(json.dumps({"kind": "nova-run", "workload": "nova", "params": params,
                                                 "order_index": index}))
    (d / "summary.json").write_text(json.dumps({"boots": len(ok), "active": sum(ok), "active_per_s": per_s,
                                                 "success_pct": 100.0 * sum(ok) / len(ok)}))
    pd.DataFrame({"request_id": [f"req-{name}-{i}" for i in range(len(ok))], "ok": ok,
                  "nova_boot_s": [s if k else None for s, k in zip(boot_s, ok, strict=True)]}
                 ).to_parquet(d / "boots.parquet")


def test_the_report_compares_each_configuration_with_the_first(tmp_path: Path) -> None:
    for r in range(2):  # failures before, none after; after is faster
        _run(tmp_path, f"b{r}", "before", [True, False, False, True] * 3, [3.0 + r, 3.5, 4.0, 3.2] * 3,
             0.5 + 0.1 * r, 2 * r)
        _run(tmp_path, f"a{r}", "after", [True] * 12, [1.0 + 0.1 * r, 1.2, 1.1, 0.9] * 3, 1.5 + 0.1 * r,
             2 * r + 1)
    df = load([tmp_path])
    traced = pd.DataFrame({"run": ["b0", "b0"], "request_id": ["req-b0-0", "req-b0-1"], "retries": [1, 0]})
    t = beforeafter.compare(df, traced).set_index("configuration")
    assert list(t.index) == ["before", "after"]  # the order they ran in: before is the baseline
    assert t.loc["before", "failure_pct"] == pytest.approx(50.0) and t.loc["after", "failure_pct"] == 0.0
    assert t.loc["before", "failure_pct_lo"] <= 50.0 <= t.loc["before", "failure_pct_hi"]
    assert t.loc["before", "retry_pct"] == pytest.approx(50.0)   # 1 of the 2 traced boots
    assert t.loc["after", "active_per_s"] == pytest.approx(1.55)
    assert t.loc["after", "active_per_s_vs_before"].endswith("real")
    assert t.loc["after", "failure_pct_vs_before"].endswith("real")
    assert t.loc["after", "nova_boot_s_vs_before"].startswith("-")
    html = "".join(beforeafter.section(df, traced))
    assert "Before/after: configurations compared" in html and "<svg" in html
    assert beforeafter.section(df.drop(columns=["configuration"]), None) == []
