"""The nova study through the production shape, for real: Debian's haproxy in front of two
Keystones, placement and nova-api, a 3-node RabbitMQ cluster, two control sites (issue 28).
Boots succeed; haproxy's per-run counters show requests to every Keystone; nothing is left."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Juice
from tests.services.conftest import needs_lab
from tests.stacks import nova_spec
from tests.studies.nova.test_hosts import RUN_FILES
from tests.studies.nova.test_nova_run import _own_namespaces, _runs

pytestmark = needs_lab


def _haproxies() -> set[int]:
    """pids of every haproxy process on this machine (other tests' included: compared before/after)."""
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "comm").read_text().strip() == "haproxy":
                    out.add(int(p.name))
            except OSError:
                pass
    return out


def test_boots_through_haproxy_two_keystones_and_a_rabbitmq_cluster(tmp_path: Path, juice: Juice) -> None:
    spec = nova_spec(tmp_path, "np", scenarios=["boot_server"], runner={"times": 3, "concurrency": [2]},
                     haproxy={"maxconn": [4000]},
                     topology={"control_sites": [1, 2], "keystones": 2, "rabbitmq_nodes": 3})
    before_ns, before_hp = set(_own_namespaces()), _haproxies()
    code, _, err = juice("run", str(spec))
    assert code == 0, err
    (run,) = _runs(tmp_path, "np")
    assert {p.name for p in run.iterdir()} == RUN_FILES | {"haproxy-stats.json"}
    man = json.loads((run / "manifest.json").read_text())
    assert man["summary"]["success_pct"] == 100.0 and man["params"]["haproxy_maxconn"] == 4000
    dep = man["deployment"]
    assert dep["keystone_sites"] == [1, 2] and dep["rabbitmq_nodes"] == 3
    assert dep["haproxy"]["maxconn"] == 4000 and set(dep["haproxy"]["frontends"]) == {
        "keystone", "placement", "nova-api"}
    devs = {(d["server"], d["option"]): d for d in man["deviations"]}
    assert devs[("haproxy", "global maxconn")]["value"] == "4000"
    hp = json.loads((run / "haproxy-stats.json").read_text())
    assert hp["info"]["Maxconn"] == "4000"
    # the process-wide connections sampled during the run: some, far from the limit
    assert hp["sampled"]["samples"] > 0 and 0 < hp["sampled"]["max_curr_conns"] < 4000
    assert hp["sampled"]["at_limit"] == 0
    stot = {(r["pxname"], r["svname"]): int(r["stot"] or 0) for r in hp["stats"]}
    # every Keystone got requests during the run (tokens for the driver's users, nova's and
    # placement's token validation), and so did nova-api and placement
    assert stot[("keystone", "keystone-s1")] > 0 and stot[("keystone", "keystone-s2")] > 0
    assert stot[("nova-api", "nova-api-s1")] > 0 and stot[("placement", "placement-s1")] > 0
    logs = b"".join(p.read_bytes() for p in (run / "logs").glob("*haproxy*"))
    assert b"keystone keystone/keystone-s" in logs  # httplog lines: frontend backend/server
    # the report's haproxy table, rebuilt from the stored counters
    html = (tmp_path / "results" / "np" / "report.html").read_text()
    assert "haproxy per run" in html
    assert set(_own_namespaces()) <= before_ns  # the lab is gone
    assert _haproxies() <= before_hp            # and our haproxy with it
