"""Run order as a design choice (``juice.sweep.order``) on the Keystone study's points: every
mode is a permutation that keeps labs, deployments and WAN blocks together; the order is a pure
function of the spec and its seed; ``interleaved`` runs every point early and late."""

from __future__ import annotations

from itertools import groupby
from typing import Any

import pytest

from juice.studies.keystone.matrix import RunPoint, expand
from juice.studies.keystone.spec import parse
from juice.sweep import order


def spec(**over: Any) -> Any:
    data: dict[str, Any] = {"name": "o", "rdbms": ["mariadb", "postgres"], "sites": [1, 3],
                            "wan": {"delay_ms": [0, 50, 150]}, "repetitions": 2,
                            "scenarios": ["authenticate_user_and_validate_token",
                                          "create_user_update_password"]}
    data.update(over)
    return parse(data)


def runs_of(points: list[RunPoint], key: Any) -> int:
    return sum(1 for _ in groupby(points, key=key))


@pytest.mark.parametrize("mode", order.ORDERS)
def test_every_mode_is_a_permutation_that_opens_no_more_labs_or_deployments(mode: str) -> None:
    pts = expand(spec())
    got = order.arrange(pts, mode, seed=1)
    assert sorted(p.key for p in got) == sorted(p.key for p in pts)
    assert runs_of(got, lambda p: p.lab_key) == runs_of(pts, lambda p: p.lab_key)
    assert runs_of(got, lambda p: (p.lab_key, p.deployment_key)) == runs_of(
        pts, lambda p: (p.lab_key, p.deployment_key))


def test_shuffled_changes_the_wan_as_often_as_as_written() -> None:
    pts = expand(spec())
    got = order.arrange(pts, "shuffled", seed=3)
    blocks = lambda ps: runs_of(ps, lambda p: (p.deployment_key, p.block_key))  # noqa: E731
    assert blocks(got) == blocks(pts)
    assert [p.key for p in got] != [p.key for p in pts]


def test_the_order_is_a_pure_function_of_the_spec_and_its_seed() -> None:
    a = [p.key for p in order.arrange(expand(spec()), "interleaved", 7)]
    b = [p.key for p in order.arrange(expand(spec()), "interleaved", 7)]
    c = [p.key for p in order.arrange(expand(spec()), "interleaved", 8)]
    assert a == b and a != c


def test_the_order_is_no_part_of_a_run_key() -> None:
    keys = {m: sorted(p.key for p in expand(spec(runner={"order": m}))) for m in order.ORDERS}
    assert keys["as-written"] == keys["shuffled"] == keys["interleaved"]


def test_interleaved_balances_positions_with_two_repetitions() -> None:
    pts = [p for p in expand(spec(sites=[1], rdbms=["mariadb"])) if p.sites == 1]
    got = order.arrange(pts, "interleaved", seed=1)
    pos: dict[str, list[int]] = {}
    for i, p in enumerate(got):
        pos.setdefault(p.point_key, []).append(i)
    assert len(pos) == len(pts) // 2
    sums = {sum(v) for v in pos.values()}
    assert sums == {len(got) - 1}, pos  # first pass forwards, second backwards
    # the second pass starts where the first ended: no WAN change between them
    half = len(got) // 2
    assert got[half - 1].block_key == got[half].block_key


def test_as_written_keeps_expand_order_and_a_point_first() -> None:
    pts = expand(spec(sites=[1], rdbms=["mariadb"], repetitions=1))
    assert order.arrange(pts, "as-written", 1) == pts
    assert order.mode_of(spec()) == "interleaved"  # the default
    assert order.mode_of(object()) == "as-written"  # a study without the field


def test_an_unknown_order_is_a_one_line_error() -> None:
    from juice.errors import UserError

    with pytest.raises(UserError, match="runner.order"):
        spec(runner={"order": "random"})


def test_interleaved_wan_changes_are_estimated_and_stay_under_the_specs_bound() -> None:
    from juice.studies.keystone import estimate
    from juice.studies.keystone.spec import work_bound_s

    s = spec(repetitions=4)
    written = estimate.total_s(order.arrange(expand(s), "as-written", 1))
    inter = estimate.total_s(order.arrange(expand(s), "interleaved", 1))
    assert written < inter <= work_bound_s(s)
