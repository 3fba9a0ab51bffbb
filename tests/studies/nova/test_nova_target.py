"""The nova study against a cloud Juice did not set up for the run: a real nova stack started
beforehand (the suite's shared ``nova_cloud``), reached only through a clouds.yaml (Keystone)
and nova's URL on loopback forwarders, as a user's cloud would be. Not a Juice lab to the run
(no `juice keystone up --publish` record): it needs --yes; the dry run sends nothing; the run
boots and deletes, and leaves no server, user or project behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.openstack.keystone import Credentials, KeystoneClient
from tests.conftest import Juice
from tests.services.conftest import needs_lab
from tests.stacks import NovaCloud

pytestmark = needs_lab


@pytest.fixture
def cloud(nova_cloud: NovaCloud, tmp_path: Path) -> dict[str, Any]:
    """The suite's shared nova stack (tests/stacks.py) as this test's cloud: a clouds.yaml
    and nova's URL on loopback forwarders; this test's own files in ``tmp_path``."""
    return {"tmp": tmp_path, "clouds": nova_cloud.clouds, "auth": nova_cloud.auth,
            "stack": nova_cloud.dep, "compute_url": nova_cloud.compute_url}


def _juice_names(cloud: dict[str, Any]) -> dict[str, list[str]]:
    auth = cloud["auth"]

    async def go() -> dict[str, list[str]]:
        c = KeystoneClient(auth["auth_url"])
        try:
            admin = Credentials(auth["username"], auth["password"], auth["project_name"])
            tok = (await c.issue_token(admin)).id
            users = [u["name"] for u in await c.list_users(tok) if u["name"].startswith("s_juice_")]
            projects = [p["name"] for p in await c.list_projects(tok) if p["name"].startswith("s_juice_")]
            return {"users": users, "projects": projects}
        finally:
            await c.close()

    out = asyncio.run(go())
    listed = cloud["stack"].client(1).call("GET", "/servers?all_tenants=1").json()["servers"]
    servers = [s["name"] for s in listed]
    out["servers"] = [s for s in servers if s.startswith("s_juice_")]
    return out


def _server_log_tails(cloud: dict[str, Any]) -> str:
    """The errors in the cloud's Keystone and nova-api logs (why a run failed, when it did)."""
    dep = cloud["stack"]
    out = []
    for name, path in (("keystone", dep.ks.log(1)), ("nova-api", dep.nova.log("juice-api"))):
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError as e:
            lines = [f"({e})"]
        bad = [x for x in lines if " ERROR " in x or "Traceback" in x or " 50" in x][-15:]
        out.append(f"\n--- {name} ({path}): {len(bad)} error line(s), the last:\n" + "\n".join(bad))
    return "".join(out)


def test_boots_against_an_existing_cloud_need_yes_and_leave_nothing(cloud: dict[str, Any],
                                                                     juice: Juice) -> None:
    spec = cloud["tmp"] / "nova-target.yaml"
    spec.write_text(yaml.safe_dump({
        "workload": "nova", "name": "nova-target", "results": str(cloud["tmp"] / "results"),
        "target": {"cloud": "mycloud", "clouds_file": str(cloud["clouds"]), "max_rps": 40},
        "image": cloud["stack"].image_id, "compute_url": cloud["compute_url"],
        "flavor": {"name": "juice-small"},
        "scenarios": ["boot_and_delete_server", "boot_server"], "runner": {"times": 3, "concurrency": [2]},
        "poll_interval_s": 0.5}))
    code, _, err = juice("run", str(spec))
    assert code == 2 and "--yes" in err and "boot 6 servers" in err
    code, out, _ = juice("run", str(spec), "--dry-run")
    assert code == 0 and "nothing was sent" in out and "POST /v2.1/servers" in out
    assert not (cloud["tmp"] / "results").exists()
    code, out, err = juice("run", str(spec), "--yes")
    assert code == 0, err + _server_log_tails(cloud)
    runs = sorted(d for d in (cloud["tmp"] / "results").iterdir() if d.is_dir())
    assert len(runs) == 2
    for r in runs:
        man = json.loads((r / "manifest.json").read_text())
        assert man["summary"]["active"] == 3 and man["summary"]["nova_timestamps"] == 0
        assert man["target"]["compute_url"] == cloud["compute_url"]
        assert "nova_boot_time" in man["target"]["not_measured"]
        assert man["leftovers_deleted"]["servers"] == 0  # the runs deleted their own
        every = b"".join(p.read_bytes() for p in r.rglob("*") if p.is_file())
        assert cloud["auth"]["password"].encode() not in every
    assert _juice_names(cloud) == {"users": [], "projects": [], "servers": []}
