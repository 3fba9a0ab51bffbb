"""The messaging spec, the agents' layout and packing (no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from juice.errors import UserError
from juice.lab.place import ThisHost
from juice.spec.base import read_yaml
from juice.studies import get
from juice.studies.messaging import agents as ag

EXAMPLE = Path(__file__).parents[3] / "examples" / "messaging.yaml"
STUDY = get("messaging")


def parse(**over: object) -> object:
    data = {"workload": "messaging", "name": "t", "sites": 3, "buses": [{"kind": "rabbitmq"}],
            "cases": [{"tc": "tc1"}]}
    data.update(over)
    return STUDY.parse(data, "t.yaml")


def test_example_parses_and_expands_with_unique_stable_keys() -> None:
    spec = STUDY.parse(read_yaml(EXAMPLE), str(EXAMPLE))
    pts = STUDY.expand(spec)
    keys = [p.key for p in pts]
    assert len(pts) >= 2 and len(set(keys)) == len(keys)
    assert [p.key for p in STUDY.expand(STUDY.parse(read_yaml(EXAMPLE), "again"))] == keys
    # equal lab / deployment keys are adjacent (the runner opens each once)
    labs = [p.lab_key for p in pts]
    assert labs == sorted(labs, key=labs.index)
    deps = [p.deployment_key for p in pts]
    assert all(deps.index(d) == i or deps[i - 1] == d for i, d in enumerate(deps))
    assert sum(STUDY.estimate_s(p) for p in pts) + STUDY.overhead_s(pts) <= 20 * 60


@pytest.mark.parametrize(("over", "field"), [
    ({"cases": [{"tc": "tc2", "clients": 5}]}, "clients"),
    ({"cases": [{"tc": "tc5"}]}, "faults"),
    ({"cases": [{"tc": "tc1", "faults": [{"at_s": 1, "partition": 2, "duration_s": 1}]}]}, "faults"),
    ({"cases": [{"tc": "tc1", "clients_in": [4]}]}, "clients_in"),
    ({"cases": [{"tc": "tc3", "method": "cast"}]}, "method"),
    ({"cases": [{"tc": "tc1", "servers": [5, 5]}]}, "servers"),
    ({"cases": [{"tc": "tc1", "rate": 0}]}, "rate"),
    ({"cases": [{"tc": "tc1", "clients": 20_000, "servers": 1}]}, "agents"),
    ({"buses": [{"kind": "nats", "nodes": 3}]}, "nodes"),
    ({"buses": [{"kind": "qdrouterd"}]}, "kind"),
    ({"delay_ms": 501}, "delay_ms"),
    ({"arrivals": "burst"}, "arrivals"),
])
def test_bad_input_names_the_field(over: dict[str, object], field: str) -> None:
    with pytest.raises(UserError) as e:
        parse(**over)
    msg = str(e.value)
    assert msg.startswith("t.yaml") and field in msg and "\n" not in msg


def test_scalars_and_lists_are_axes() -> None:
    spec = parse(cases=[{"tc": "tc1", "clients": [1, 10], "rate": [50, 100.0]}], delay_ms=[0, 50])
    pts = STUDY.expand(spec)  # type: ignore[arg-type]
    assert len(pts) == 2 * 2 * 2
    assert {(p.clients, p.rate, p.delay_ms) for p in pts} == {
        (c, r, d) for c in (1, 10) for r in (50.0, 100.0) for d in (0.0, 50.0)}


@pytest.mark.parametrize(("tc", "c", "s", "t"), [("tc1", 7, 3, 1), ("tc2", 1, 1, 5), ("tc3", 2, 6, 1),
                                                 ("tc4", 1, 4, 3), ("tc5", 3, 2, 1)])
def test_layout_counts_and_placement(tc: str, c: int, s: int, t: int) -> None:
    agents = ag.layout(tc, c, s, t, "call", 3, clients_in=[1], servers_in=[2, 3])
    servers = [a for a in agents if a.role == "server"]
    clients = [a for a in agents if a.role == "client"]
    want_s = {"tc2": t, "tc4": t * s}.get(tc, s)
    want_c = {"tc2": t, "tc4": t}.get(tc, c)
    assert (len(servers), len(clients)) == (want_s, want_c)
    assert {a.site for a in clients} == {1} and {a.site for a in servers} <= {2, 3}
    assert len({a.id for a in agents}) == len(agents)
    exp = ag.expected_per_message(agents)
    fanout = tc in ("tc3", "tc4")
    assert all(a.method == ("fanout" if fanout else "call") for a in clients)
    for topic, n in exp.items():
        assert n == (sum(1 for a in servers if a.topic == topic) if fanout else 1)


def test_pack_splits_by_site_and_role_and_shares_the_rate() -> None:
    agents = ag.layout("tc1", 25, 7, 1, "cast", 2)
    procs = ag.pack(agents, per_process=5, rate=300.0)
    assert sum(len(p.agents) for p in procs) == len(agents)
    assert all(len(p.agents) <= 5 and len({(a.site, a.role) for a in p.agents}) == 1 for p in procs)
    assert sum(p.rate for p in procs) == pytest.approx(300.0)
    assert all(p.rate == 0 for p in procs if p.role == "server")
    assert len({p.name for p in procs}) == len(procs)


def test_qdrouterd_is_refused_with_the_reason() -> None:
    with pytest.raises(UserError) as e:
        parse(buses=[{"kind": "qdrouterd"}])
    assert "not supported" in str(e.value) and "rabbitmq-federation" in str(e.value)


@pytest.mark.parametrize("flavour", ["classic", "mirrored", "quorum", "quorum-transient", "queue-manager",
                                     "stream-fanout", "recommended"])
def test_every_flavour_has_its_oslo_options(flavour: str, tmp_path: Path) -> None:
    from juice.studies.messaging import buses
    from juice.studies.messaging.spec import Bus

    text = buses.conf_text(Bus(kind="rabbitmq", queues=flavour), timeout_s=30)  # type: ignore[arg-type]
    opts = buses.FLAVOUR_OPTIONS[flavour]
    assert "[oslo_messaging_rabbit]" in text and "rpc_response_timeout = 30" in text
    assert all(f"{k} = {v}" in text for k, v in opts.items())
    if flavour == "stream-fanout":  # oslo refuses a stream fanout without prefetch and transient quorum
        assert opts["rabbit_transient_quorum_queue"] == "true" and int(opts["rabbit_qos_prefetch_count"]) > 0


class _HereLab:
    """Every site's place: this machine, the lab's directory ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def place(self, site: int) -> ThisHost:
        return ThisHost(self.root)


def test_each_agent_process_gets_its_own_queue_manager_identity(tmp_path: Path) -> None:
    import json

    places = tmp_path / "places"
    run = ag.AgentRun(lab=_HereLab(places), workdir=tmp_path / "back",  # type: ignore[arg-type]
                      url_of=lambda s: f"rabbit://h{s}/", conf_text="[DEFAULT]\n", progress=print,
                      duration_s=1, timeout_s=1, length=1, pool=1)
    procs = ag.pack(ag.layout("tc1", 4, 4, 1, "call", 2), per_process=2, rate=10.0)
    with run:
        run.procs = list(procs)
        for site in (1, 2):
            run._prepare(site)
        plans = [run._plan(p) for p in procs]
        idents = [run._identity(p) for p in procs]
        # the files are at the site's place, under the run's tag
        assert plans[0]["conf_files"][0] == str(places / "s1" / "agents" / run.tag / "agent.conf")
        assert "lock_path" in (places / "s1" / "agents" / run.tag / "agent.conf").read_text()
        assert plans[0]["go"].startswith(str(places / f"s{procs[0].site}" / "agents" / run.tag))
    assert len(set(idents)) == len(procs) and all("processname = juice-agent-" in i for i in idents)
    assert json.loads(json.dumps(plans))[0]["run"] == run.tag
    # leaving the block removes the agent directories at the places
    assert not (places / "s1" / "agents" / run.tag).exists() and (tmp_path / "back").is_dir()
