"""The pre-warm's loop and the log it reads (juice.services.openstack.keystone_warm), without a server: the
place is a stand-in whose Keystone log gains a worker's full-collection line after a number of
request batches. The real server's side is in tests/services/test_keystone.py."""

from __future__ import annotations

import gc
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from juice import onhost
from juice.cli.keystone import _prewarm_sites
from juice.errors import UserError
from juice.lab.place import Result
from juice.onhost import gc_probe
from juice.services.openstack import keystone_warm as kw
from juice.services.openstack.keystone import GC_PROBE, WSGI_SHIM


class FakeKeystonePlace:
    """A site whose workers log their first full collection after ``after[pid]`` batches."""

    site = 2

    def __init__(self, after: dict[int, int], fail: bool = False) -> None:
        self.after, self.fail, self.batches = after, fail, 0
        self.argv: list[list[str]] = []

    def read(self, path: Path, max_bytes: int = 64 << 20) -> bytes | None:
        lines = [b"[INFO] Booting worker with pid: 11", b"juice-gc pid=11 start objects=211694"]
        lines += [f"juice-gc pid={p} gen=2 collected=870 ms={100 + p}.5".encode()
                  for p, n in self.after.items() if self.batches >= n]
        return b"\n".join(lines) + b"\n"

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
            env: Mapping[str, str] | None = None) -> Result:
        self.argv.append(list(argv))
        if self.fail:
            return Result(1, "", "keystone POST /auth/tokens: 503")
        self.batches += 1
        return Result(0, f'{{"requests": {kw.BATCH + 1}, "errors": 1}}\n', "")


def test_the_log_lines_are_parsed_per_worker_in_order() -> None:
    log = (b"juice-gc pid=7 start objects=5\njuice-gc pid=7 gen=2 collected=3 ms=120.5\n"
           b"noise juice-gc pid=8 gen=2 collected=0 ms=99.0\njuice-gc pid=7 gen=2 collected=1 ms=4.0\n")
    assert kw.full_collections(log) == {7: [120.5, 4.0], 8: [99.0]}
    assert kw.full_collections(b"") == {}


def test_the_shim_installs_the_probe_whose_lines_are_read_back() -> None:
    assert "keystone.wsgi.api import application" in WSGI_SHIM and "install()" in WSGI_SHIM
    assert onhost.source("gc_probe") == GC_PROBE
    out = io.StringIO()
    hook = gc_probe.install(out)
    try:
        gc.collect(0)
        gc.collect()
    finally:
        gc.callbacks.remove(hook)
    (pauses,) = kw.full_collections(out.getvalue().encode()).values()  # one worker, this one
    assert len(pauses) == 1 and pauses[0] >= 0


def test_prewarm_sends_batches_until_every_worker_had_its_first_full_collection() -> None:
    place = FakeKeystonePlace({11: 2, 12: 3})
    w = kw.prewarm(place, "http://10.0.0.2:5000/v3", Path("/x.log"), [12, 11], {"OS_USERNAME": "a"}, "py")  # type: ignore[arg-type]
    assert w.done and w.workers == [11, 12] and place.batches == 3
    assert w.first_full_gc_ms == {"11": 111.5, "12": 112.5}
    assert w.requests == 3 * (kw.BATCH + 1) and w.errors == 3
    # two threads per worker, so that concurrent requests reach each of them
    assert place.argv[0][:2] == ["py", "-c"]
    assert place.argv[0][2] == onhost.source("keystone_api")
    assert place.argv[0][3:] == ["prewarm", "http://10.0.0.2:5000/v3", str(kw.BATCH), "4"]
    assert w.to_dict()["site"] == 2


def test_prewarm_of_a_warm_worker_sends_nothing() -> None:
    place = FakeKeystonePlace({11: 0})
    w = kw.prewarm(place, "u", Path("/x.log"), [11], {}, "py")  # type: ignore[arg-type]
    assert w.done and place.batches == 0 and w.requests == 0


def test_prewarm_stops_when_the_server_refuses_and_says_so_in_its_record() -> None:
    place = FakeKeystonePlace({11: 1}, fail=True)
    w = kw.prewarm(place, "u", Path("/x.log"), [11], {}, "py")  # type: ignore[arg-type]
    assert not w.done and len(place.argv) == 1 and w.errors == kw.BATCH and w.requests == 0


def test_prewarm_is_bounded_when_a_worker_never_collects() -> None:
    place = FakeKeystonePlace({11: 1, 12: 10_000})
    w = kw.prewarm(place, "u", Path("/x.log"), [11, 12], {}, "py")  # type: ignore[arg-type]
    assert not w.done and place.batches == kw.MAX_BATCHES and list(w.first_full_gc_ms) == ["11"]


def test_the_cli_reads_the_sites_to_prewarm_and_names_the_flag_when_wrong() -> None:
    assert _prewarm_sites("all") is None and _prewarm_sites("1,3") == (1, 3)
    for bad in ("x", "0", "1,,2"):
        with pytest.raises(UserError, match="^--prewarm: "):
            _prewarm_sites(bad)
