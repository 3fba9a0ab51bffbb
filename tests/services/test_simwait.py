"""Simulated waits (juice.services.openstack.simwait): reproducible draws, bounds, the seed004 table,
validation; the fake server's stages and its threaded, waiting, failing answers."""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from juice.services.openstack import fake_server, simwait
from juice.services.openstack.nova_conf import ComputeOptions, Computes, render_nodes

KEYS = [f"instance-{i}" for i in range(400)]


@pytest.mark.parametrize("d", [
    {"dist": "constant", "value_s": 2},
    {"dist": "uniform", "low_s": 1, "high_s": 5},
    {"dist": "lognormal", "median_s": 20, "sigma": 1.0},
    {"dist": "table", "table": "seed004"},
    {"dist": "table", "points": [[0, 1], [0.5, 2], [1, 30]]},
])
def test_draws_are_valid_reproducible_and_seed_dependent(d: dict[str, Any]) -> None:
    assert simwait.check(d) is None
    first = [simwait.draw(d, "spawn", k, seed=7) for k in KEYS]
    assert first == [simwait.draw(d, "spawn", k, seed=7) for k in KEYS]  # same (seed, key): same
    assert all(0 <= x <= simwait.DEFAULT_CAP_S for x in first)
    if d["dist"] != "constant":
        assert first != [simwait.draw(d, "spawn", k, seed=8) for k in KEYS]
        assert first != [simwait.draw(d, "image_fetch", k, seed=7) for k in KEYS]  # stages differ
        own = simwait.draw({**d, "seed": 8}, "spawn", KEYS[0], seed=7)  # the distribution's seed wins
        assert own == simwait.draw(d, "spawn", KEYS[0], 8)


def test_bounds_of_each_distribution() -> None:
    uni = [simwait.draw({"dist": "uniform", "low_s": 1, "high_s": 5}, "s", k) for k in KEYS]
    assert min(uni) >= 1 and max(uni) <= 5
    tab = [simwait.draw({"dist": "table", "table": "seed004"}, "s", k) for k in KEYS]
    lo, hi = simwait.TABLES["seed004"][0][1], simwait.TABLES["seed004"][-1][1]
    assert min(tab) >= lo and max(tab) <= hi
    # log-uniform between the seed's extremes: the median is their geometric mean
    assert simwait.quantile({"dist": "table", "table": "seed004"}, 0.5) == pytest.approx(math.sqrt(lo * hi))
    logn = {"dist": "lognormal", "median_s": 20, "sigma": 1.0}
    assert simwait.quantile(logn, 0.5) == pytest.approx(20)
    capped = [simwait.draw({**logn, "sigma": 4.0, "cap_s": 30}, "s", k) for k in KEYS]
    assert max(capped) == 30 and min(capped) < 30  # the cap bounds a run
    assert simwait.draw({"dist": "constant", "value_s": 2}, "s", "x") == 2


def test_the_mean_after_the_cap_is_what_a_plan_adds() -> None:
    assert simwait.mean({"dist": "constant", "value_s": 2}) == 2.0
    assert simwait.mean({"dist": "uniform", "low_s": 1, "high_s": 3}) == pytest.approx(2.0)
    capped = simwait.mean({"dist": "table", "table": "seed004", "cap_s": 60})
    free = simwait.mean({"dist": "table", "table": "seed004", "cap_s": 3600})
    assert 6.45 < capped < 60 < free < 354  # the cap takes the long tail off


def test_a_plan_counts_the_simulated_spawn_time() -> None:
    from juice.studies.nova.points import expand
    from juice.studies.nova.spec import parse
    from juice.studies.nova.study import NovaStudy

    def spec(**computes: Any) -> dict[str, Any]:
        return {"workload": "nova", "name": "est", "sites": 2, "scenarios": ["boot_server"],
                "runner": {"times": 100, "concurrency": [20]},
                "computes": {"processes": 1, "nodes_per_process": 50, **computes}}

    study = NovaStudy()
    (plain,) = expand(parse(spec(), "a.yaml"))
    wait = {"dist": "constant", "value_s": 30}
    (slow,) = expand(parse(spec(spawn_time=wait), "b.yaml"))
    (forked,) = expand(parse(spec(spawn_time=wait, isolation="fork"), "c.yaml"))
    # one shared process has 10 build slots: 100 boots of >= 30 s take >= 300 s; forked, 50
    # nodes have 10 each and the 20 concurrent requests are the limit
    assert study.estimate_s(slow) >= 100 * 30 / 10 > study.estimate_s(forked) >= 100 * 30 / 20
    assert study.estimate_s(plain) < study.estimate_s(forked)


def test_failures_follow_the_probability_reproducibly() -> None:
    assert not any(simwait.fails(0.0, 1, "spawn", k) for k in KEYS)
    assert all(simwait.fails(1.0, 1, "spawn", k) for k in KEYS)
    some = [simwait.fails(0.5, 1, "spawn", k) for k in KEYS]
    assert some == [simwait.fails(0.5, 1, "spawn", k) for k in KEYS] and any(some) and not all(some)


@pytest.mark.parametrize("d,match", [
    ({"dist": "gamma"}, r"^dist: expected one of constant"),
    ({"dist": "constant"}, r"^value_s: required"),
    ({"dist": "constant", "value_s": -1}, r"^value_s: expected a number of seconds >= 0"),
    ({"dist": "constant", "value_s": 1, "mean_s": 2}, r"^mean_s: not a parameter of dist constant"),
    ({"dist": "uniform", "low_s": 5, "high_s": 1}, r"^high_s: must be >= low_s"),
    ({"dist": "lognormal", "median_s": 0, "sigma": 1}, r"^median_s: expected seconds > 0"),
    ({"dist": "constant", "value_s": 1, "cap_s": 7200}, r"^cap_s: expected seconds in \(0, 3600\]"),
    ({"dist": "constant", "value_s": 1, "seed": "x"}, r"^seed: expected an integer"),
    ({"dist": "table", "table": "seed009"}, r"^table: expected one of seed004"),
    ({"dist": "table"}, r"^table: give either table"),
    ({"dist": "table", "points": [[0, 1], [0.5, 0.5]]}, r"^points: quantiles must increase"),
    ({"dist": "table", "points": [[0, 1]]}, r"^points: expected at least two"),
    ("fast", r"^expected a mapping"),
])
def test_bad_distributions_name_the_key(d: Any, match: str) -> None:
    err = simwait.check(d)
    assert err is not None and "\n" not in err
    assert re.search(match, err), err


def test_the_driver_gets_its_simulation_and_older_node_files_have_none() -> None:
    plain = render_nodes("juice-c1", 2, ComputeOptions())
    assert "simulation" not in plain
    comp = ComputeOptions(Computes(spawn_time={"dist": "constant", "value_s": 2}), spawn_failure=0.25,
                          sim_seed=3)
    sim = render_nodes("juice-c1", 2, comp)["simulation"]
    assert sim == {"spawn_time": {"dist": "constant", "value_s": 2}, "spawn_failure": 0.25, "seed": 3}


def test_the_fakes_stages() -> None:
    img = f"/v2/images/{fake_server.IMAGE_ID}"
    assert fake_server.stage_of("glance", "GET", img) == "image_fetch"
    assert fake_server.stage_of("glance", "GET", "/v2/schemas/image") is None
    assert fake_server.stage_of("neutron", "POST", "/v2.0/ports") == "port_create"
    # nova-compute's network listing (at the delete) is not a port creation
    assert fake_server.stage_of("neutron", "GET", "/v2.0/networks?tenant_id=p1&shared=False") is None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[str, dict[str, Any]], str]]:
    """Start the fake as a place does: its source and juice_simwait.py in a directory, run with
    python3 (no Juice importable there)."""
    import shutil
    import socket
    import subprocess

    shutil.copy(fake_server.__file__, tmp_path / "juice_fake_server.py")
    shutil.copy(simwait.__file__, tmp_path / "juice_simwait.py")
    procs: list[subprocess.Popen[bytes]] = []

    def start(kind: str, sim: dict[str, Any]) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        path = tmp_path / f"sim-{kind}.json"
        path.write_text(json.dumps(sim))
        procs.append(subprocess.Popen(["python3", "-s", str(tmp_path / "juice_fake_server.py"), kind,
                                       "127.0.0.1", str(port), str(path)], cwd=tmp_path,
                                      stdout=subprocess.DEVNULL, env={"PATH": os.environ["PATH"]}))
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/", timeout=1).close()
                return base
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the fake did not answer")

    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def test_a_slow_image_get_does_not_hold_other_requests(serve: Callable[[str, dict[str, Any]], str]) -> None:
    base = serve("glance", {"wait": {"dist": "constant", "value_s": 3}, "failure": 0.0})
    slow: dict[str, Any] = {}

    def get() -> None:
        with urllib.request.urlopen(f"{base}/v2/images/{fake_server.IMAGE_ID}", timeout=30) as r:
            slow["status"] = r.status
    t = threading.Thread(target=get)
    t.start()
    time.sleep(0.2)
    with urllib.request.urlopen(base + "/v2/schemas/image", timeout=30) as r:  # answered meanwhile
        assert r.status == 200
    assert t.is_alive()  # the image GET still waits its simulated 3 s
    t.join(30)
    assert slow["status"] == 200


def test_injected_image_failures_answer_503_as_glanceclient_reads_it(
        serve: Callable[[str, dict[str, Any]], str]) -> None:
    base = serve("glance", {"wait": None, "failure": 1.0})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{base}/v2/images/{fake_server.IMAGE_ID}", timeout=10)
    body = json.loads(e.value.read())
    # glanceclient.exc.from_response: [obj.get("message") for obj in body.values()]
    assert e.value.code == 503 and all(isinstance(v, dict) and v.get("message") for v in body.values())


def test_injected_port_failures_answer_neutrons_500(serve: Callable[[str, dict[str, Any]], str]) -> None:
    base = serve("neutron", {"wait": None, "failure": 1.0})
    req = urllib.request.Request(base + "/v2.0/ports", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 500 and "NeutronError" in json.loads(e.value.read())
    with urllib.request.urlopen(base + "/v2.0/networks?shared=True", timeout=10) as r:  # not the stage
        assert r.status == 200
