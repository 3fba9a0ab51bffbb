"""The real glance-api (glance 33 under gunicorn) with the lab's MariaDB and Keystone: the image
uploaded at start-up is active through the API with a real token, a client uploads, lists and
reads one of its own, a bad token is refused by keystonemiddleware; after ``stop`` nothing of
it runs. Rendering is checked without a lab."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from juice.errors import ServiceError
from juice.services.openstack.glance import IMAGE_ID, Glance, image_bytes, render_glance_conf
from tests.services.conftest import FakeSites, needs_lab


def test_conf_has_the_file_store_authtoken_and_the_keystone_pipeline() -> None:
    text = render_glance_conf(db_url="mysql+pymysql://u:p@h/glance", auth_url="http://k:5000/v3",
                              password="pw", home=Path("/s1/glance"))
    for line in ("enabled_backends = fs:file", "default_backend = fs",
                 "filesystem_store_datadir = /s1/glance/images", "flavor = keystone",
                 "config_file = /s1/glance/glance-api-paste.ini", "username = glance",
                 "connection = mysql+pymysql://u:p@h/glance"):
        assert line in text.splitlines(), line
    assert "[os_glance_staging_store]\nfilesystem_store_datadir = /s1/glance/staging" in text


def test_image_bytes_are_deterministic_and_options_checked() -> None:
    assert image_bytes(1) == image_bytes(1) and len(image_bytes(2)) == 2 << 20
    with pytest.raises(Exception, match="glance.workers"):
        Glance(FakeSites(), object(), object(), workers=0)  # type: ignore[arg-type]
    (d,) = Glance(FakeSites(), object(), object()).deviations()  # type: ignore[arg-type]
    assert (d.server, d.option, d.value, d.default) == ("glance-api", "gunicorn --workers", "2", "1")


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_real_glance_serves_images_to_keystone_tokens_only(lab_name: str) -> None:
    from juice.lab import LocalLab, netns, spec
    from juice.services import registry

    ls = spec.parse({"name": lab_name, "sites": 2, "delay_ms": 0})
    with LocalLab.up(ls, ephemeral=True) as lab:
        with registry.deploy(lab, "mariadb") as db:
            _serve(lab, db)
        # glance, Keystone and the database stopped by pid: nothing runs in the sites any more
        assert not [p for k in lab.sites for p in netns.pids(lab.site_ns(k))]


def _serve(lab: Any, db: Any) -> None:
    from juice.openstack.http import issue_token, request
    from juice.services.openstack.keystone import Keystone, KeystoneOptions
    from juice.util import proc

    ks = Keystone(lab, db, options=KeystoneOptions(password_hash_rounds=4, prewarm=False))
    gl = Glance(lab, db, ks, site=1, workers=1)
    try:
        ks.up()
        gl.up()
        pids = gl.pids()
        assert len(pids) == 2  # the gunicorn master and its one worker
        token = issue_token(lab, 1, ks.admin_credentials())
        # the deployment's image, read from the other site with a real token
        img = gl.image(IMAGE_ID, token=token)
        assert (img["status"], img["size"], img["disk_format"]) == ("active", 1 << 20, "raw")
        assert img["checksum"] == hashlib.md5(image_bytes(1), usedforsecurity=False).hexdigest()
        # a client's own image: create, upload, list, download
        mine = gl.call("POST", "/v2/images", token=token, ok=(201,), site=2, body={
            "name": "juice-test", "disk_format": "raw", "container_format": "bare"})
        gl.call("PUT", f"/v2/images/{mine['id']}/file", token=token, data=b"x" * 4096, site=2, ok=(204,))
        assert {i["id"] for i in gl.images(token)} == {IMAGE_ID, mine["id"]}
        r = request(lab, 2, "GET", f"{gl.url()}/v2/images/{mine['id']}/file",
                    headers={"X-Auth-Token": token, "Accept": "application/octet-stream"})
        assert (r.status, r.body) == (200, b"x" * 4096)
        stored = Path(gl.home / "images" / mine["id"])
        assert stored.read_bytes() == b"x" * 4096  # the file store under the place's state dir
        # keystonemiddleware validates against Keystone: a bad token is refused
        with pytest.raises(ServiceError, match="401"):
            gl.images("not-a-token")
        seen = gl.requests()
        assert ("GET", "/v2/images", 401) in seen and ("PUT", f"/v2/images/{IMAGE_ID}/file", 204) in seen
        assert gl.records()[0].kind == "glance-api"
        assert gl.facts()["glance_version"].startswith("33.")
    finally:
        gl.stop()
        ks.stop()
    assert not [p for p in pids if proc.alive(p)]
