"""Where a target cloud's credentials come from (clouds.yaml, openrc, Rally env, explicit), and
that a password never reaches what a manifest keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from juice.errors import UserError
from juice.spec.target import Target, resolve

CLOUDS = """
clouds:
  lab:
    region_name: RegionOne
    auth:
      auth_url: http://10.210.1.2:5000/v3
      username: admin
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
"""


def test_clouds_yaml_on_the_search_path_with_secure_yaml(tmp_path: Path) -> None:
    cfg = tmp_path / "home" / ".config" / "openstack"
    cfg.mkdir(parents=True)
    (cfg / "clouds.yaml").write_text(CLOUDS)
    (cfg / "secure.yaml").write_text("clouds: {lab: {auth: {password: s3cret}}}\n")
    c = resolve(Target(cloud="lab"), environ={}, cwd=tmp_path, home=tmp_path / "home")
    assert (c.auth_url, c.username, c.password, c.region_name) == (
        "http://10.210.1.2:5000/v3", "admin", "s3cret", "RegionOne")
    assert "s3cret" not in json.dumps(c.public()) and "s3cret" not in repr(c)


def test_clouds_yaml_password_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "clouds.yaml").write_text(CLOUDS)
    t = Target(cloud="lab", password_env="MY_PW")
    assert resolve(t, environ={"MY_PW": "pw"}, cwd=tmp_path, home=tmp_path).password == "pw"
    with pytest.raises(UserError, match="MY_PW"):
        resolve(t, environ={}, cwd=tmp_path, home=tmp_path)


def test_clouds_yaml_errors_name_the_file_and_cloud(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CLOUDS)
    with pytest.raises(UserError, match=r"no cloud named 'other' \(clouds: lab\)"):
        resolve(Target(cloud="other", clouds_file=str(tmp_path / "c.yaml")), environ={"OS_PASSWORD": "x"})
    with pytest.raises(UserError, match="no clouds.yaml found"):
        resolve(Target(cloud="lab"), environ={}, cwd=tmp_path / "nowhere", home=tmp_path / "nohome")
    env = {"OS_CLIENT_CONFIG_FILE": str(tmp_path / "c.yaml"), "OS_PASSWORD": "x"}
    assert resolve(Target(cloud="lab"), environ=env, cwd=tmp_path / "nowhere").username == "admin"


def test_openrc_is_parsed_not_executed(tmp_path: Path) -> None:
    rc = tmp_path / "admin-openrc.sh"
    rc.write_text("export OS_AUTH_URL=http://10.210.1.2:5000/v3\nexport OS_USERNAME='admin'\n"
                  "export OS_PROJECT_NAME=admin\necho \"Please enter your password\"\n"
                  "read -sr OS_PASSWORD_INPUT\nexport OS_PASSWORD=$OS_PASSWORD_INPUT\n"
                  "export OS_REGION_NAME=RegionOne\n")
    c = resolve(Target(openrc=str(rc)), environ={"OS_PASSWORD": "from-env"})
    assert (c.username, c.password, c.region_name, c.project_domain_name) == (
        "admin", "from-env", "RegionOne", "Default")


def test_rally_env_spec(tmp_path: Path) -> None:
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"openstack": {"auth_url": "http://10.210.1.2:5000/v3", "region_name": "R1",
                                             "admin": {"username": "admin", "password": "pw",
                                                       "tenant_name": "admin"}}}))
    c = resolve(Target(rally_env=str(env)), environ={})
    assert (c.project_name, c.password, c.region_name) == ("admin", "pw", "R1")
    env.write_text("{}")
    with pytest.raises(UserError, match="openstack"):
        resolve(Target(rally_env=str(env)), environ={})


def test_explicit_target_takes_the_password_from_the_environment_only() -> None:
    t = Target(auth_url="http://10.210.1.2:5000/v3", username="u", project_name="p")
    assert resolve(t, environ={"OS_PASSWORD": "pw"}).password == "pw"
    with pytest.raises(ValidationError):
        Target.model_validate({"auth_url": "http://x:5000/v3", "username": "u", "project_name": "p",
                               "password": "in-the-spec"})   # no password field at all


@pytest.mark.parametrize("data", [{}, {"cloud": "a", "openrc": "b"}, {"clouds_file": "x", "openrc": "b"},
                                  {"auth_url": "http://x:5000/v3"}, {"auth_url": "ftp://x"},
                                  {"cloud": "a", "password_env": "lower"}])
def test_bad_targets_are_refused(data: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Target.model_validate(data)
