"""The nova study's image service (issue 40): the real glance by default, the fake-glance stand-in
only when the spec asks (``image_service: fake-glance``), named in the run key, the deployment,
its deviations and the report; fake-glance's simulated waits only with the stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from juice.errors import UserError
from juice.studies.nova.points import expand
from juice.studies.nova.spec import parse


def spec(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"workload": "nova", "name": "n", "scenarios": ["boot_server"],
                            "computes": {"processes": 1, "nodes_per_process": 5}}
    return {**data, **over}


def test_the_real_glance_is_the_default_and_the_stand_in_keeps_earlier_keys() -> None:
    from juice.studies.nova.study import _stack, roles

    real, fake = parse(spec(), "n"), parse(spec(image_service="fake-glance"), "n")
    assert real.image_service == "glance"
    p_real, p_fake = expand(real)[0], expand(fake)[0]
    # runs made before the real glance used the stand-in: their key had no such entry
    assert p_real.fixed["image_service"] == "glance" and "image_service" not in p_fake.fixed
    # the nodes download the image (what a libvirt node does) unless told not to; in the key
    assert real.image_download == "node_cache" and p_real.fixed["image_download"] == "node_cache"
    quiet = parse(spec(image_download="none"), "n")
    assert expand(quiet)[0].key != p_real.key and _stack(quiet, expand(quiet)[0]).image_download == "none"
    assert "image_download" not in p_fake.fixed
    assert p_real.key != p_fake.key
    assert _stack(real, p_real).image_service == "glance"
    assert _stack(fake, p_fake).image_service == "fake-glance"
    assert any("glance-api" in x for x in roles(real, p_real)[1])
    assert any("fake-glance" in x for x in roles(fake, p_fake)[1])
    assert not any("fake-glance" in x for x in roles(real, p_real)[1])


@pytest.mark.parametrize("over,match", [
    ({"fakes": {"image_fetch_s": {"dist": "constant", "value_s": 1}}},
     r"fakes\.image_fetch_s: simulates fake-glance's answers"),
    ({"failures": {"image_fetch": 0.1}}, r"failures\.image_fetch: simulates fake-glance's answers"),
    ({"image_service": "glance-ng"}, r"image_service"),
    ({"image_service": "fake-glance", "image_download": "node_cache"},
     r"image_download: fake-glance serves no image data"),
    ({"target": {"cloud": "c"}, "image": "0" * 32, "image_service": "fake-glance"},
     r"image_service: not with a target"),
])
def test_bad_image_service_settings_name_the_field(over: dict[str, Any], match: str) -> None:
    data = spec(**over)
    if "target" in over:
        del data["computes"]
    with pytest.raises(UserError, match=match):
        parse(data, "n.yaml")


def test_the_stack_runs_glance_or_the_stand_in_and_records_the_choice() -> None:
    from juice.services.openstack.nova_deploy import NovaStack

    real, fake = NovaStack(), NovaStack(image_service="fake-glance")
    assert real.image_service == "glance"
    # glance's pools count in the database's limit (2 workers x oslo.db's 5 + 50)
    (n_real, how), (n_fake, _) = real.db_limit(), fake.db_limit()
    assert n_real is not None and n_fake is not None and n_real - n_fake == 110 and "glance 110" in how
    with pytest.raises(UserError, match="fakes_simulation.glance"):
        NovaStack(fakes_simulation={"glance": {"failure": 0.1}})
    with pytest.raises(UserError, match="image_service"):
        NovaStack(image_service="swift")


def test_the_stand_in_is_a_deviation_of_the_deployment(tmp_path: Path) -> None:
    from juice.services.openstack.nova_deploy import NovaDeployment, NovaStack

    class Lab:  # what the constructors read (nothing is started)
        sites = range(1, 3)
        workdir = tmp_path

        def site_ip(self, site: int) -> str:
            return f"10.210.{site}.2"

    fake = NovaDeployment(Lab(), stack=NovaStack(image_service="fake-glance"))  # type: ignore[arg-type]
    assert fake.glance is None and fake.fakes is not None and fake.fakes.kinds == ("glance",)
    (d,) = fake.stand_ins()
    assert (d.server, d.option, d.value, d.default, d.source) == (
        "image service", "image_service", "fake-glance (stand-in)", "glance", "spec")
    real = NovaDeployment(Lab(), stack=NovaStack())  # type: ignore[arg-type]
    assert real.glance is not None and not real.stand_ins()
    # the nodes download through glance (the nodes file's image entry), never from the stand-in
    assert real.computes.image_download and not fake.computes.image_download
    quiet = NovaDeployment(Lab(), stack=NovaStack(image_download="none"))  # type: ignore[arg-type]
    assert not quiet.computes.image_download
    assert real.image_id == real.glance.image_id != fake.image_id
    assert "glance" in real.needs()["computes"] and "glance" not in fake.needs()


def test_the_report_says_which_image_service_served_the_runs(tmp_path: Path) -> None:
    from juice.studies.nova.report import image_service_note

    dirs = []
    for i, dep in enumerate([{"image_service": "glance"}, {"image_service": "glance"}, {}]):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"deployment": dep}))
        dirs.append(d)
    assert image_service_note(dirs[:2]) == ("Image service: the real glance-api (tokens validated by "
                                            "Keystone, the image uploaded through its API).")
    mixed = image_service_note(dirs)
    assert "the image uploaded through its API) in 2 of 3 runs" in mixed
    assert "fake-glance" in mixed and "in 1 of 3 runs" in mixed
