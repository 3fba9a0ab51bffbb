"""The real glance-api (glance 33 under gunicorn) with the lab's MariaDB and Keystone, as the
suite's shared nova stack runs it: the image uploaded at start-up is active through the API with
a real token, a client uploads, lists, reads and deletes one of its own, a bad token is refused
by keystonemiddleware; after the stack's ``stop`` nothing of it runs (the fixture's teardown).
Rendering is checked without a lab."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from juice.errors import ServiceError
from juice.services.openstack.glance import IMAGE_ID, Glance, image_bytes, render_glance_conf
from tests.services.conftest import FakeSites, needs_lab
from tests.stacks import NovaCloud


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
def test_real_glance_serves_images_to_keystone_tokens_only(nova_cloud: NovaCloud) -> None:
    """On the suite's shared nova stack (tests/stacks.py): its glance-api, on the lab's MariaDB
    and Keystone, started and stopped by the fixture (whose teardown checks that nothing is left
    in the sites); this test leaves it as it found it (its own image deleted)."""
    from juice.openstack.http import issue_token, request

    dep = nova_cloud.dep
    gl, lab = dep.glance, dep.lab
    assert gl is not None and gl.records()[0].kind == "glance-api"
    assert len(gl.pids()) == 1 + gl.workers  # the gunicorn master and its workers
    token = issue_token(lab, 1, dep.ks.admin_credentials())
    # the deployment's image, read from the computes' site with a real token
    img = gl.image(IMAGE_ID, token=token)
    assert (img["status"], img["size"], img["disk_format"]) == ("active", 1 << 20, "raw")
    assert img["checksum"] == hashlib.md5(image_bytes(1), usedforsecurity=False).hexdigest()
    # a client's own image: create, upload, list, download, delete
    mine = gl.call("POST", "/v2/images", token=token, ok=(201,), site=2, body={
        "name": "juice-test-glance", "disk_format": "raw", "container_format": "bare"})
    stored = Path(gl.home / "images" / mine["id"])
    try:
        gl.call("PUT", f"/v2/images/{mine['id']}/file", token=token, data=b"x" * 4096, site=2, ok=(204,))
        assert {IMAGE_ID, mine["id"]} <= {i["id"] for i in gl.images(token)}
        r = request(lab, 2, "GET", f"{gl.url()}/v2/images/{mine['id']}/file",
                    headers={"X-Auth-Token": token, "Accept": "application/octet-stream"})
        assert (r.status, r.body) == (200, b"x" * 4096)
        assert stored.read_bytes() == b"x" * 4096  # the file store under the place's state dir
        # keystonemiddleware validates against Keystone: a bad token is refused
        with pytest.raises(ServiceError, match="401"):
            gl.images("not-a-token")
    finally:
        gl.call("DELETE", f"/v2/images/{mine['id']}", token=token, ok=(204,))
    assert not stored.exists() and mine["id"] not in {i["id"] for i in gl.images(token)}
    seen = gl.requests()
    assert ("GET", "/v2/images", 401) in seen and ("PUT", f"/v2/images/{IMAGE_ID}/file", 204) in seen
    facts = gl.facts()
    assert facts["glance_version"].startswith("33.") and facts["store"] == "file"
