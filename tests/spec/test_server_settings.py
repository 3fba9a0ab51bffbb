"""Server options in the Keystone and nova specs under their upstream names: validated with
one-line errors naming the field, carried to the runs (max_connections is a Keystone axis), and
left out of run keys while unset (runs made before them keep their keys)."""

from __future__ import annotations

from typing import Any

import pytest

from juice.errors import UserError
from juice.studies.keystone.matrix import expand as ks_expand
from juice.studies.keystone.spec import parse as ks_parse
from juice.studies.keystone.study import KeystoneStudy
from juice.studies.nova.points import expand as nova_expand
from juice.studies.nova.spec import parse as nova_parse
from juice.studies.nova.study import _stack


def ks(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": "t", "rdbms": ["mariadb"], "sites": [3], "wan": {"delay_ms": [0]},
                         "scenarios": ["authenticate_user_and_validate_token"],
                         "runner": {"times": 4, "concurrency": 2}}
    d.update(over)
    return d


def nova(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"workload": "nova", "name": "n", "scenarios": ["boot_server"],
                         "computes": {"processes": 2, "nodes_per_process": 5}}
    d.update(over)
    return d


@pytest.mark.parametrize(("patch", "field"), [
    ({"database": {"max_connections": [0]}}, "database.max_connections.0"),
    ({"database": {"max_connections": [151, 151]}}, "database.max_connections"),
    ({"database": {"max_connections": []}}, "database.max_connections"),
    ({"database": {"max_conections": [10]}}, "database.max_conections"),
    ({"database": {"max_connections": [200]}, "rdbms": ["cockroach"]}, "database.max_connections"),
    ({"keystone": {"max_pool_size": 0}}, "keystone.max_pool_size"),
    ({"keystone": {"max_overflow": -2}}, "keystone.max_overflow"),
])
def test_keystone_spec_bad_server_option_named(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(UserError) as e:
        ks_parse(ks(**patch), "x.yaml")
    msg = str(e.value)
    assert msg.startswith("x.yaml: ") and field in msg and "\n" not in msg


def test_keystone_max_connections_is_an_axis_and_unset_keeps_keys() -> None:
    plain = ks_expand(ks_parse(ks(), "x"))
    assert all(p.server == {} for p in plain)
    axis = ks_expand(ks_parse(ks(database={"max_connections": [151, 500]},
                                 keystone={"max_pool_size": 10}), "x"))
    assert len(axis) == 2 * len(plain)
    assert [p.server["max_connections"] for p in axis] == [151, 500]
    assert all(p.server["max_pool_size"] == 10 for p in axis)
    assert len({p.deployment_key for p in axis}) == 2  # a database per value
    assert not {p.key for p in axis} & {p.key for p in plain}
    assert axis[1].params()["max_connections"] == 500 and "mc500" in axis[1].dirname
    assert "max_connections" not in plain[0].params()
    study = KeystoneStudy()
    assert [study.plan_columns(p)["max_connections"] for p in axis] == [151, 500]
    assert "max_connections" not in study.plan_columns(plain[0])
    # an empty section is the same spec as none: the same keys
    assert [p.key for p in ks_expand(ks_parse(ks(database={}), "x"))] == [p.key for p in plain]


@pytest.mark.parametrize(("patch", "field"), [
    ({"rpc_response_timeout": 0}, "server.rpc_response_timeout"),
    ({"executor_thread_pool_size": 1001}, "server.executor_thread_pool_size"),
    ({"rpc_conn_pool_size": 0}, "server.rpc_conn_pool_size"),
    ({"max_overflow": -2}, "server.max_overflow"),
    ({"conductor_workers": 0}, "server.conductor_workers"),
    ({"max_connections": 0}, "server.max_connections"),
    ({"rpc_timeout": 5}, "server.rpc_timeout"),
])
def test_nova_spec_bad_server_option_named(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(UserError) as e:
        nova_parse(nova(server=patch), "n.yaml")
    msg = str(e.value)
    assert msg.startswith("n.yaml: ") and field in msg and "\n" not in msg


def test_nova_server_options_reach_the_stack_and_unset_keeps_keys() -> None:
    plain_spec = nova_parse(nova(), "n")
    plain = nova_expand(plain_spec)
    assert [p.key for p in nova_expand(nova_parse(nova(server={}), "n"))] == [p.key for p in plain]
    s = nova_parse(nova(server={"rpc_response_timeout": 120, "executor_thread_pool_size": 16,
                                "max_overflow": 10, "conductor_workers": 2, "max_connections": 300}), "n")
    pts = nova_expand(s)
    assert not {p.key for p in pts} & {p.key for p in plain}
    st = _stack(s, pts[0])
    assert (st.nova.rpc_response_timeout, st.nova.executor_thread_pool_size) == (120, 16)
    assert (st.nova.max_overflow, st.nova.conductor_workers, st.nova.max_pool_size) == (10, 2, 10)
    assert st.db_limit() == (300, None)
    default = _stack(plain_spec, plain[0])
    limit, why = default.db_limit()
    assert default.db_max_connections is None and limit is not None and why is not None
