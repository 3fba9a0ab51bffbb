"""The nova deployment's memory plan (juice.studies.nova.sitemap): what runs in each site with
the memory it needs, summed per machine and checked against the machine's MemAvailable before
anything is deployed — a spec that needs more than a host has is refused in one line naming the
host and the numbers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from juice.errors import UserError
from juice.lab.place import Result
from juice.studies.nova import sitemap
from juice.studies.nova.points import expand
from juice.studies.nova.spec import parse
from juice.studies.nova.study import _stack, roles


def _spec(**computes: Any) -> Any:
    return parse({"workload": "nova", "name": "mem", "sites": 3, "scenarios": ["boot_server"],
                  "computes": {"processes": 4, "nodes_per_process": 25, "sites": [2, 3], **computes}},
                 "mem.yaml")


def _plan(**computes: Any) -> dict[int, list[sitemap.Part]]:
    spec = _spec(**computes)
    (p,) = expand(spec)
    return sitemap.parts(spec, p, _stack(spec, p))


def test_the_computes_memory_follows_the_isolation() -> None:
    shared, forked = _plan(), _plan(isolation="fork")
    # 2 processes per compute site, 25 nodes each
    (s_shared,) = [x for x in shared[2] if "nova-compute" in x.label]
    (s_forked,) = [x for x in forked[2] if "nova-compute" in x.label]
    assert s_shared.mb == pytest.approx(2 * (sitemap.MB["compute_process"] + 25 * sitemap.MB["node_shared"]))
    assert s_forked.mb == pytest.approx(2 * (sitemap.MB["compute_process"] + 25 * sitemap.MB["node_forked"]))
    assert "forked" in s_forked.label and "forked" not in s_shared.label
    # the controllers are in site 1 only, the same either way
    assert [x.label for x in shared[1]] == [x.label for x in forked[1]]
    assert {x.label.split(" ")[0] for x in shared[1]} >= {"database", "rabbitmq", "keystone", "placement",
                                                           "nova-api", "nova-conductor"}


def test_the_dry_run_roles_say_the_memory_of_each_part() -> None:
    spec = _spec()
    (p,) = expand(spec)
    plan = roles(spec, p)
    assert any(x.startswith("nova-api (~") and x.endswith(" MB)") for x in plan[1]), plan[1]
    assert any(x.startswith("2 nova-compute x 25 nodes (~") for x in plan[2]), plan[2]


@dataclass
class _Place:
    machine: str
    label: str
    meminfo: bytes | None

    pid_max: int = 4_194_304

    def run(self, argv: list[str], *, timeout: float = 60.0) -> Result:
        """``cat`` of a /proc file, as the host's agent runs it (it reads no file itself)."""
        assert argv[0] == "cat" and timeout > 0
        found = {"/proc/sys/kernel/pid_max": f"{self.pid_max}\n".encode(),
                 "/proc/sys/kernel/threads-max": b"1000000\n", "/proc/meminfo": self.meminfo}[argv[1]]
        if found is None:
            return Result(1, "", f"cat: {argv[1]}: Permission denied")
        return Result(0, found.decode(), "")


class _Lab:
    def __init__(self, places: dict[int, _Place]) -> None:
        self.places = places

    def place(self, site: int) -> _Place:
        return self.places[site]


def _meminfo(mb: float) -> bytes:
    return f"MemTotal: {int(mb * 2048)} kB\nMemAvailable: {int(mb * 1024)} kB\n".encode()


def test_sites_on_one_machine_add_up_and_a_short_host_is_refused_by_name() -> None:
    plan = _plan(isolation="fork", nodes_per_process=100)  # 2 x 100 forked nodes per compute site
    need = {k: sitemap.total_mb(v) for k, v in plan.items()}
    assert need[2] == need[3] > 2 * 100 * sitemap.MB["node_forked"]
    # one machine: every site adds up
    one = _Place("m", "site 1", _meminfo(sum(need.values()) * 2))
    lines = sitemap.check(_Lab({1: one, 2: one, 3: one}), [plan])  # type: ignore[arg-type]
    assert len(lines) == 1 and lines[0].startswith("memory plan: sites 1, 2, 3 (site 1) ~")
    # three hosts: host 3 has less than its computes need
    lab = _Lab({1: _Place("h1", "site 1 (host h1)", _meminfo(64_000)),
                2: _Place("h2", "site 2 (host h2)", _meminfo(64_000)),
                3: _Place("h3", "site 3 (host h3)", _meminfo(need[3]))})
    with pytest.raises(UserError) as e:
        sitemap.check(lab, [plan])  # type: ignore[arg-type]
    msg = str(e.value)
    assert msg.startswith("computes: site 3 (host h3) would need ~") and "\n" not in msg
    assert f"has {need[3] / 1024:.1f} GB available" in msg and "computes.isolation: shared" in msg
    # the largest deployment decides; a host whose meminfo cannot be read is said, not refused
    small = _plan()
    lab.places[3] = _Place("h3", "site 3 (host h3)", None)
    lines = sitemap.check(lab, [small, plan])  # type: ignore[arg-type]
    assert any("site 3 (host h3) needs ~" in x and "unknown" in x for x in lines)


def test_mem_available_is_read_from_proc_meminfo() -> None:
    assert sitemap.mem_available_mb("MemTotal: 2048 kB\nMemAvailable: 1024 kB\n") == 1.0
    assert sitemap.mem_available_mb("MemTotal: 2048 kB\n") is None
    assert sitemap.mem_available_mb(Path("/proc/meminfo").read_text()) is not None


def test_forked_nodes_threads_are_checked_against_pid_max() -> None:
    plan = _plan(isolation="fork", nodes_per_process=250)  # 2 x 250 forked nodes per compute site
    threads = sum(x.threads for x in plan[2])
    assert threads == 500 * sitemap.THREADS_FORKED_NODE and sum(x.threads for x in plan[1]) == 0
    roomy = _Place("h2", "site 2 (host h2)", _meminfo(200_000))
    lab = _Lab({1: roomy, 2: roomy, 3: _Place("h3", "site 3 (host h3)", _meminfo(200_000), pid_max=32768)})
    with pytest.raises(UserError, match=r"^computes: site 3 \(host h3\) would run ~40,000 threads .* "
                                        r"kernel.pid_max is 32,768"):
        sitemap.check(lab, [plan])  # type: ignore[arg-type]
    assert sitemap.check(lab, [_plan()])  # shared nodes: a few threads per process, never refused
