"""The experiment spec: strict parsing, field-path errors, the run matrix and its order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.errors import UserError
from juice.spec.base import read_yaml
from juice.studies.keystone import estimate
from juice.studies.keystone.matrix import expand
from juice.studies.keystone.spec import parse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def base(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": "t", "rdbms": ["mariadb", "galera"], "sites": [3],
                         "wan": {"delay_ms": [0, 50]}, "scenarios": ["authenticate_user_and_validate_token"],
                         "runner": {"times": 4, "concurrency": 2}}
    d.update(over)
    return d


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_parses(path: Path) -> None:
    from juice import studies

    study, spec, _ = studies.load_spec(path)
    points = study.expand(spec)
    assert points and len({p.key for p in points}) == len(points)


@pytest.mark.parametrize(("patch", "field"), [
    ({"rdbms": ["oracle"]}, "rdbms"),
    ({"sites": [0]}, "sites"),
    ({"wan": {"delay_ms": [-1]}}, "wan.delay_ms"),
    ({"wan": {"delay": [1]}}, "wan.delay"),
    ({"runner": {"times": 0}}, "runner.times"),
    ({"load": ["medium"]}, "load.0"),
    ({"bogus": 1}, "bogus"),
    ({"scenarios": []}, "scenarios"),
    ({"wan": {"zones": [{"count": 4, "intra_ms": 1, "inter_ms": 2}]}}, "wan.zones.0.count"),
])
def test_bad_field_named_in_one_line(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(UserError) as e:
        parse(base(**patch), "x.yaml")
    msg = str(e.value)
    assert msg.startswith("x.yaml: ") and field in msg and "\n" not in msg


def test_missing_required_field() -> None:
    data = base()
    del data["rdbms"]
    with pytest.raises(UserError, match=r"x.yaml: rdbms: required field is missing"):
        parse(data, "x.yaml")


def test_read_yaml_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such spec file"):
        read_yaml(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        read_yaml(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(UserError, match="expected a mapping"):
        read_yaml(scalar)


def test_matrix_is_the_product_in_reuse_order() -> None:
    exp = parse(base(load=["light", "high"], repetitions=2), "x")
    pts = expand(exp)
    assert len(pts) == 2 * 2 * 2 * 1 * 2  # rdbms × wan × load × scenario × repetitions
    assert len({p.key for p in pts}) == len(pts)
    # deployments are contiguous (one bring-up each), WAN points contiguous inside them
    deps = [p.deployment for p in pts]
    assert [d for i, d in enumerate(deps) if i == 0 or deps[i - 1] != d] == sorted(set(deps), key=deps.index)
    assert len(sorted(set(deps), key=deps.index)) == 2


def test_run_key_is_stable_and_parameter_sensitive() -> None:
    a = expand(parse(base(), "x"))
    b = expand(parse(base(), "x"))
    assert [p.key for p in a] == [p.key for p in b]
    c = expand(parse(base(runner={"times": 5, "concurrency": 2}), "x"))
    assert {p.key for p in a}.isdisjoint({p.key for p in c})


def test_params_are_the_manifest_columns() -> None:
    p = expand(parse(base(), "x"))[-1]
    params = p.params()
    assert params["rdbms"] == "galera" and params["sites"] == 3 and params["delay_ms"] == 50
    assert params["run_id"] == p.key and params["load"] == "light"
    yaml.safe_dump(params)  # plain data only


def test_zones_and_matrix_points_build_lab_specs() -> None:
    exp = parse(base(sites=[6], wan={"zones": [{"count": 2, "intra_ms": 5, "inter_ms": 40}]}), "x")
    lab = expand(exp)[0].wan.lab_spec("z", 6, 0, 0)
    assert lab.zones == {"Z1": [1, 2, 3], "Z2": [4, 5, 6]}
    m = [[0, 1, 2], [1, 0, 3], [2, 3, 0]]
    exp = parse(base(sites=[3], wan={"matrices": [m]}), "x")
    assert expand(exp)[0].wan.lab_spec("m", 3, 0, 0).matrix == m
    with pytest.raises(UserError, match="wan.matrices.0"):
        parse(base(sites=[4], wan={"matrices": [m]}), "x")


def test_estimate_grows_with_work() -> None:
    small = expand(parse(base(), "x"))
    big = expand(parse(base(runner={"times": 400, "concurrency": 2}), "x"))
    assert estimate.total_s(big) > estimate.total_s(small) > 0
