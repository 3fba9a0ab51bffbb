"""The Keystone study against an existing cloud, without a cloud: the spec's target section, the
points it expands to, the dry run (the run's own code against the recording simulator), the
rate cap's schedule, and the published clouds.yaml. The real runs are in test_target_run.py."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.errors import UserError
from juice.openstack import keystone as ksclient
from juice.openstack.creds import AdminCredentials
from juice.services.openstack import keystone_publish as pub
from juice.spec.target import Target, resolve
from juice.studies.keystone import catalog, dryrun, safety
from juice.studies.keystone.matrix import expand
from juice.studies.keystone.spec import parse

TARGET = {"auth_url": "http://127.0.0.1:5000/v3", "username": "admin", "project_name": "admin",
          "password_env": "JUICE_TEST_UNSET_PASSWORD"}


def spec(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "t", "target": dict(TARGET), "scenarios": ["create_user_update_password"],
                            "runner": {"times": 3, "concurrency": 2}}
    data.update(over)
    return data


def test_a_target_spec_expands_without_lab_axes_and_its_keys_differ_from_a_lab_run() -> None:
    exp = parse(spec(load=["light", "high"], repetitions=2), "t.yaml")
    pts = expand(exp)
    assert len(pts) == 4 and {p.target for p in pts} == {"admin@http://127.0.0.1:5000/v3"}
    assert {p.rdbms for p in pts} == {"existing"} and all(p.params()["cache"] is None for p in pts)
    assert all(p.params()["max_rps"] == 20.0 for p in pts)  # the default cap
    lab = expand(parse({k: v for k, v in spec(rdbms=["mariadb"], sites=[1]).items() if k != "target"}, "l"))
    assert lab[0].key not in {p.key for p in pts} and lab[0].target is None


@pytest.mark.parametrize("extra,field", [({"rdbms": ["mariadb"]}, "rdbms"), ({"sites": [3]}, "sites"),
                                         ({"wan": {"delay_ms": [50]}}, "wan"),
                                         ({"keystone": {"workers": 2}}, "keystone")])
def test_lab_fields_are_refused_with_a_target_naming_the_field(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(UserError, match=rf"^t.yaml: {field}: not with a target"):
        parse(spec(**extra), "t.yaml")


def test_faults_are_refused_with_a_target_and_a_lab_spec_still_needs_rdbms() -> None:
    with pytest.raises(UserError, match=r"faults: not with a target"):
        parse(spec(faults=[{"at_s": 1, "partition": 1, "duration_s": 1}]), "t.yaml")
    with pytest.raises(UserError, match=r"^l.yaml: rdbms: required field is missing"):
        parse({"name": "l", "sites": [1], "scenarios": ["create_user_update_password"]}, "l.yaml")


@pytest.mark.parametrize("bad,match", [({"max_rps": 0}, "max_rps"), ({"max_rps": True}, "max_rps"),
                                       ({"endpoints": {"R": "ftp://x"}}, "endpoints")])
def test_target_bounds(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=match):
        parse(spec(target={**TARGET, **bad}), "t.yaml")


@pytest.mark.parametrize("name", sorted(catalog.names()))
def test_the_dry_run_executes_every_scenario_and_counts_what_it_creates(name: str) -> None:
    users = {"users": {"tenants": 2, "users_per_tenant": 2}}
    exp = parse(spec(scenarios=[{"name": name, "contexts": users}]), "t.yaml")
    rec = safety.simulate(exp, expand(exp))
    phases = {p for p, _, _ in rec.calls}
    assert phases == {"connect", "run 1", "cleanup 1"}
    made = rec.created("run 1")
    assert made["project"] >= 2 and made["user"] >= 4  # the users context: 2 tenants x 2 users
    # what a run creates, it deletes: the cleanup after it finds nothing of its prefix
    assert not any(c.startswith("DELETE") for p, c, _ in rec.calls if p == "cleanup 1")
    deleted = sum(1 for p, c, _ in rec.calls if p == "run 1" and c.startswith("DELETE"))
    assert deleted >= made["user"] + made["project"] - 3  # -3: create_user_set_enabled_and_delete's own


def test_dry_run_counts_follow_the_iterations() -> None:
    exp = parse(spec(runner={"times": 7, "concurrency": 3, "warmup": 2}), "t.yaml")
    rec = safety.simulate(exp, expand(exp))
    run = rec.counts("run 1")
    # create_user_update_password: one user per iteration (warm-up included) + the context's one
    assert run["POST /v3/users"] == 7 + 2 + 1 and run["PATCH /v3/users/{id}"] == 7 + 2
    assert rec.counts("connect")["GET /v3"] == 5  # the RTT probes
    lines = safety.dry_run_lines(exp, expand(exp), lambda _: None)
    assert "nothing was sent" in lines[0] and any("PATCH /v3/users/{id}" in x for x in lines)


def test_call_templates_hide_ids_only() -> None:
    assert dryrun.template("GET", "/v3/users/" + "a" * 32) == "GET /v3/users/{id}"
    assert dryrun.template("GET", "/v3/domains?name=Default") == "GET /v3/domains?name=Default"


def test_the_rate_cap_gives_each_request_the_next_free_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    slept: list[float] = []

    async def fake_sleep(s: float) -> None:
        slept.append(s)

    monkeypatch.setattr(ksclient.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(ksclient.asyncio, "sleep", fake_sleep)
    cap = ksclient.RateCap(4.0)

    async def burst() -> None:
        for _ in range(5):
            await cap.take()

    asyncio.run(burst())  # five at once: slots 0, .25, .5, .75, 1.0 s from now
    assert slept == [0.25, 0.5, 0.75, 1.0]
    clock[0] += 10.0  # idle for long: no credit is saved up (no burst after a pause)
    slept.clear()
    asyncio.run(burst())
    assert slept == [0.25, 0.5, 0.75, 1.0]
    with pytest.raises(ValueError):
        ksclient.RateCap(0.0)


def test_published_clouds_yaml_names_the_lab_and_its_loopback_endpoints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = AdminCredentials(urls=((1, "x"),), username="admin", password="pw-123")
    doc = pub.clouds("lab7", {1: (40001, "Region1"), 2: (40002, "Region2")}, admin)
    path = pub.write_clouds(tmp_path, doc)
    assert path.stat().st_mode & 0o777 == 0o600 and "&id" not in path.read_text()
    assert set(yaml.safe_load(path.read_text())["clouds"]) == {"juice-lab7", "juice-lab7-s1", "juice-lab7-s2"}
    monkeypatch.delenv("OS_PASSWORD", raising=False)
    c = resolve(Target(cloud="juice-lab7", clouds_file=str(path)))
    assert c.juice_lab == "lab7" and c.auth_url == "http://127.0.0.1:40001/v3" and c.password == "pw-123"
    assert c.endpoints == {"Region1": "http://127.0.0.1:40001/v3", "Region2": "http://127.0.0.1:40002/v3"}
    assert "pw-123" not in repr(c) and "pw-123" not in str(c.public())


def test_private_tmp_of_a_dead_process_is_swept_and_a_live_ones_kept(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    from juice import paths

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    live = paths.private_tmp("target")
    # every kind the code makes (a remote lab's: juice.lab.remote), swept alike once its pid is gone
    dead = [tmp_path / f"juice-{kind}-999999999-abcd1234" for kind in ("target", "remote")]  # no such pid
    for d in dead:
        d.mkdir()
    other = tmp_path / "juice-rally-12345678"  # not a private_tmp dir: never touched
    other.mkdir()
    assert sorted(paths.sweep_private_tmp()) == sorted(dead)
    assert live.is_dir() and other.is_dir() and not any(d.exists() for d in dead)
    made = {m for f in Path(paths.__file__).parent.rglob("*.py")
            for m in re.findall(r'private_tmp\("(\w+)"\)', f.read_text())}
    assert made <= set(paths.PRIVATE_TMP_KINDS), made  # no kind that the sweep would not know


@pytest.mark.parametrize("bad,match", [
    ({"host": "-oProxyCommand=sh"}, r"target\.ssh\.0\.host"),
    ({"host": "h", "port": 0}, r"target\.ssh\.0\.port: must be >= 1"),
    ({"host": "h", "port": "22"}, r"target\.ssh\.0\.port: expected an integer"),
    ({"host": "h", "user": "-l"}, r"target\.ssh\.0\.user"),
    ({"host": "h", "password": "x"}, r"target\.ssh\.0\.password: never in the spec"),
    ({"host": "h", "processes": ["mariadb=("]}, r"target\.ssh\.0\.processes: not a regular expression"),
    ({"host": "h", "processes": []}, r"target\.ssh\.0\.processes"),
    ({"host": "h", "site_name": "a b"}, r"target\.ssh\.0\.site_name"),
])
def test_ssh_hosts_are_bounded_and_errors_name_the_field(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(UserError, match=rf"^t.yaml: {match}"):
        parse(spec(target={**TARGET, "ssh": [bad]}), "t.yaml")
    with pytest.raises(UserError, match=r"target\.ssh: "):
        parse(spec(target={**TARGET, "ssh": []}), "t.yaml")


def test_ssh_access_gives_defaults_and_does_not_change_run_keys() -> None:
    from juice.spec.target import DEFAULT_PROCESSES
    from juice.studies.keystone.target import TargetDeployment

    plain = parse(spec(), "t.yaml")
    exp = parse(spec(target={**TARGET, "ssh": [{"host": "ctl1"}, {"host": "db1", "port": 2222,
                                                                  "processes": ["mariadbd"]}]}), "t.yaml")
    assert exp.target is not None and exp.target.ssh is not None
    (a, b) = exp.target.ssh
    assert (a.port, a.user, a.key_file, a.patterns) == (22, "root", None, DEFAULT_PROCESSES)
    assert b.patterns == ("mariadbd",)
    assert [p.key for p in expand(exp)] == [p.key for p in expand(plain)]  # profiling is not a parameter
    creds = resolve(exp.target, {"JUICE_TEST_UNSET_PASSWORD": "pw"})
    facts = TargetDeployment(exp.target, creds, {"R": "u"}, "R", None).facts()  # type: ignore[arg-type]
    assert "resource_profile" not in facts["not_measured"]
    assert facts["resource_profile"] == "over SSH: root@ctl1:22, root@db1:2222"
    assert plain.target is not None
    plain_facts = TargetDeployment(plain.target, creds, {"R": "u"}, "R", None).facts()  # type: ignore[arg-type]
    assert "resource_profile" in plain_facts["not_measured"]
