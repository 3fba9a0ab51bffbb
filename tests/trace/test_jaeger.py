"""``juice trace --jaeger``: the traced boots loaded into a real Jaeger (v2, built from its Go
module by scripts/jaeger.sh) and read back through its query API, as a user's browser reaches
it (the loopback forwarder); and the pure parts (configuration, request bodies, time range)."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.errors import ServiceError
from juice.services.tracing.jaeger import (
    OTLP_HTTP_PORT,
    QUERY_HTTP_PORT,
    STORE,
    binary,
    chunks,
    config,
    ensure_built,
)
from juice.trace.jaeger import extent, search_link
from juice.trace.otlp import document
from juice.trace.tables import trace
from tests.conftest import Juice, lab_capable

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trace"


def _spans(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(service.name of its resource, span) for every span of an OTLP/JSON document."""
    out = []
    for rs in doc["resourceSpans"]:
        attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        svc = attrs["service.name"]["stringValue"]
        out += [(svc, s) for ss in rs["scopeSpans"] for s in ss["spans"]]
    return out


# ---- pure --------------------------------------------------------------------------------

def test_config_sends_otlp_http_to_memory_storage_and_listens_on_the_site_address() -> None:
    c = config("10.210.1.2", max_traces=50)
    assert c["service"]["pipelines"]["traces"] == {"receivers": ["otlp"], "processors": ["batch"],
                                                   "exporters": ["jaeger_storage_exporter"]}
    assert set(c["service"]["extensions"]) == set(c["extensions"])
    assert c["extensions"]["jaeger_storage"]["backends"][STORE] == {"memory": {"max_traces": 50}}
    assert c["extensions"]["jaeger_query"]["storage"]["traces"] == STORE
    assert c["exporters"]["jaeger_storage_exporter"]["trace_storage"] == STORE
    assert c["receivers"]["otlp"]["protocols"] == {"http": {"endpoint": f"10.210.1.2:{OTLP_HTTP_PORT}"}}
    assert c["extensions"]["jaeger_query"]["http"]["endpoint"] == f"10.210.1.2:{QUERY_HTTP_PORT}"
    endpoints = re.findall(r"'endpoint': '([^']+)'", str(c))
    assert endpoints and all(e.startswith("10.210.1.2:") for e in endpoints)  # nothing on 0.0.0.0
    assert c["service"]["telemetry"]["metrics"] == {"level": "none"}          # no port 8888 taken
    assert "ui" not in c["extensions"]["jaeger_query"]
    with_ui = config("10.210.1.2", ui_assets=Path("/ui"))
    assert with_ui["extensions"]["jaeger_query"]["ui"] == {"assets_path": "/ui"}


def test_request_bodies_split_between_resources_and_keep_every_span() -> None:
    doc = document(trace([FIX / "novalidhost"], workers=1))
    whole = chunks(doc)
    assert len(whole) == 1 and json.loads(whole[0]) == doc
    small = chunks(doc, limit=2000)
    assert len(small) > 1
    parts = [json.loads(b) for b in small]
    assert [rs for p in parts for rs in p["resourceSpans"]] == doc["resourceSpans"]
    for b, p in zip(small, parts, strict=True):
        assert len(b) <= 2000 + 50 or len(p["resourceSpans"]) == 1  # over the limit only alone


def test_extent_counts_traces_and_covers_every_span() -> None:
    doc = document(trace([FIX / "boot"], workers=1))
    n, (lo, hi) = extent(doc)
    spans = _spans(doc)
    assert n == len({s["traceId"] for _, s in spans}) == 4
    assert all(lo < int(s["startTimeUnixNano"]) // 1000 and int(s["endTimeUnixNano"]) // 1000 < hi
               for _, s in spans)
    assert extent({"resourceSpans": []}) == (0, (0, 0))
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(search_link("http://127.0.0.1:9", (lo, hi), n)).query)
    assert q["service"] == ["nova"] and q["limit"] == ["4"]
    assert q["start"] == [str(lo)] and q["end"] == [str(hi)]


def test_bad_jaeger_options_are_one_line_errors(juice: Juice, tmp_path: Path) -> None:
    code, _, err = juice("trace", str(FIX / "boot" / "logs"), "--jaeger-for", "-1")
    assert code == 2 and "--jaeger-for: -1 is not a number of seconds" in err
    code, _, err = juice("trace", str(FIX / "boot" / "logs"), "--jaeger-ui", str(tmp_path))
    assert code == 2 and f"--jaeger-ui: {tmp_path} has no index.html" in err


def test_ensure_built_runs_the_build_script_once_and_names_why_it_cannot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher around scripts/jaeger.sh (stand-in scripts: the real build is the test below)."""
    monkeypatch.setenv("JUICE_CACHE", str(tmp_path / "cache"))
    no_go = tmp_path / "no-go.sh"
    no_go.write_text("echo 'jaeger.sh: Go toolchain not found -- cannot build' >&2; exit 3\n")
    with pytest.raises(ServiceError, match="Jaeger cannot be built here: jaeger.sh: Go toolchain not found"):
        ensure_built(script=no_go)
    broken = tmp_path / "broken.sh"
    broken.write_text("echo 'jaeger.sh: go build of x failed' >&2; exit 1\n")
    with pytest.raises(ServiceError, match="failed with code 1: jaeger.sh: go build of x failed"):
        ensure_built(script=broken)
    builds = tmp_path / "builds"
    ok = tmp_path / "ok.sh"
    ok.write_text(f'mkdir -p "$1" && echo x >> {builds} && touch "$1/juice-jaeger-1.76.0"\n')
    said: list[str] = []
    built = ensure_built(said.append, script=ok)
    assert built == binary() == tmp_path / "cache" / "bin" / "juice-jaeger-1.76.0"
    assert ensure_built(said.append, script=no_go) == binary()            # present: nothing run
    assert builds.read_text() == "x\n" and said[0].startswith("building Jaeger 1.76.0")


class _HostPlace:
    """A stand-in for an SSH host's place (what Jaeger.configure asks of it): files in a dict."""

    site, label, address, shared_disk = 1, "site 1 (host h1)", "10.210.1.2", False

    def __init__(self, root: Path, executable: set[str]) -> None:
        self.root, self.executable, self.files = root, executable, {}  # type: dict[str, bytes]

    def run(self, argv: list[str], **_: Any) -> Any:
        from juice.lab.place import Result

        ok = argv[:2] == ["test", "-x"] and argv[2] in self.executable
        return Result(0 if ok else 1, "", "")

    def write(self, path: Path, data: str | bytes, *, mode: int = 0o644, owner: str | None = None) -> None:
        self.files[str(path)] = data.encode() if isinstance(data, str) else data
        if mode & 0o111:
            self.executable.add(str(path))

    def mkdir(self, path: Path, owner: str | None = None) -> None:
        pass

    def remove(self, path: Path) -> None:
        pass


class _HostLab:
    sites = range(1, 2)

    def __init__(self, place: _HostPlace) -> None:
        self._place = place

    def place(self, site: int) -> _HostPlace:
        return self._place

    def site_ip(self, site: int) -> str:
        return "10.210.1.2"


def test_configure_at_a_host_ships_the_binary_once_and_writes_the_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from juice.services.tracing.jaeger import Jaeger

    monkeypatch.setenv("JUICE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "bin").mkdir(parents=True)
    binary().write_bytes(b"\x7fELF stand-in")
    place = _HostPlace(Path("/var/tmp/juice/lab"), executable=set())
    j = Jaeger(_HostLab(place))
    j.configure()
    shipped = "/var/tmp/juice/lab/bin/juice-jaeger-1.76.0"
    assert j.exe == shipped and place.files[shipped] == b"\x7fELF stand-in"
    cfg = yaml.safe_load(place.files["/var/tmp/juice/lab/s1/jaeger/config.yaml"])
    assert cfg == config("10.210.1.2")
    place.files.clear()
    Jaeger(_HostLab(place)).configure()                       # the next deployment: not copied again
    assert shipped not in place.files
    place.executable.add(str(binary()))                       # the host has it where this machine does
    j2 = Jaeger(_HostLab(place))
    j2.configure()
    assert j2.exe == str(binary())
    binary().unlink()                                         # built nowhere: say how to build it
    with pytest.raises(ServiceError, match="juice-jaeger-1.76.0 is missing: run scripts/jaeger.sh"):
        Jaeger(_HostLab(_HostPlace(Path("/r"), set()))).configure()


# ---- real Jaeger -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jaeger_binary() -> Path:
    """The Jaeger binary, built now (scripts/jaeger.sh) when scripts/test-deps.sh has not."""
    if not binary().exists():  # scripts/jaeger.sh fetches the pinned Go itself (scripts/go-toolchain.sh)
        ensure_built(print)
    return binary()


def _get(url: str) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=30) as r:
        assert r.status == 200
        body = r.read()
    return json.loads(body) if body[:1] in (b"{", b"[") else body.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(lab_capable() is not None, reason=str(lab_capable()))
def test_boots_loaded_into_jaeger_read_back_through_its_api(jaeger_binary: Path, tmp_path: Path) -> None:
    ui_dir = tmp_path / "ui"          # a stand-in jaeger-ui build: served instead of the placeholder
    ui_dir.mkdir()
    (ui_dir / "index.html").write_text('<html><head><base href="/" /></head>'
                                       '<body>juice-ui-probe</body></html>')
    t = trace([FIX / "novalidhost"], workers=1)
    doc = document(t)
    want: dict[str, dict[str, Any]] = {}
    for svc, s in _spans(doc):
        want.setdefault(s["traceId"], {})[s["spanId"]] = {**s, "service": svc}
    assert len(want) == len(t.boots) == 6

    p = subprocess.Popen([sys.executable, "-m", "juice.cli", "trace", str(FIX / "novalidhost"), "-j", "1",
                          "--jaeger-for", "600", "--jaeger-ui", str(ui_dir)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    errors: list[str] = []
    threading.Thread(target=lambda: [lines.put(x) for x in p.stdout or []], daemon=True).start()
    threading.Thread(target=lambda: errors.extend(p.stderr or []), daemon=True).start()
    ui, deadline = None, time.monotonic() + 300
    try:
        while ui is None and time.monotonic() < deadline and p.poll() is None:
            try:
                m = re.search(r"Jaeger UI: (http://127\.0\.0\.1:\d+)", lines.get(timeout=1))
            except queue.Empty:
                continue
            ui = m.group(1) if m else None
        if ui is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=120)
            pytest.fail(f"no UI address printed (exit {p.returncode}): {''.join(errors)[-3000:]}")
        lo, hi = extent(doc)[1]
        got = _get(f"{ui}/api/traces?service=nova&start={lo}&end={hi}&limit=100")["data"]
        assert len(got) == len(t.boots)                                     # a trace per boot
        assert {g["traceID"] for g in got} == set(want)
        boots = t.boots.set_index("uuid")
        for g in got:
            mine = want[g["traceID"]]
            assert {s["spanID"] for s in g["spans"]} == set(mine)
            for s in g["spans"]:
                w = mine[s["spanID"]]
                assert s["operationName"] == w["name"]
                assert g["processes"][s["processID"]]["serviceName"] == w["service"]
                assert s["startTime"] == int(w["startTimeUnixNano"]) // 1000
                parents = [r["spanID"] for r in s.get("references", []) if r["refType"] == "CHILD_OF"]
                assert parents == ([w["parentSpanId"]] if w.get("parentSpanId") else [])
            (root,) = [s for s in g["spans"] if not s.get("references")]
            tags = {x["key"]: x["value"] for x in root["tags"]}
            b = boots.loc[tags["nova.instance.uuid"]]
            assert tags["nova.state"] == b["state"] and tags["nova.request_id"] == b["request_id"]
            if b["state"] == "active":
                assert tags["host.name"] == b["host"]
            else:
                assert tags["nova.error.template"].startswith("No valid host") and tags.get("error") is True
        services = set(_get(f"{ui}/api/services")["data"])
        assert {"nova", "nova-api", "nova-conductor", "nova-scheduler"} <= services
        one = next(iter(want))
        v3 = _get(f"{ui}/api/v3/traces/{one}")                              # the OTLP form back
        spans_v3 = [s for rs in v3["result"]["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
        assert {s["name"] for s in spans_v3} == {s["name"] for s in want[one].values()}
        page = _get(f"{ui}/")
        assert "juice-ui-probe" in page                                    # --jaeger-ui DIR is served
    finally:
        p.send_signal(signal.SIGTERM)                                      # as Ctrl-C: all removed
        code = p.wait(timeout=120)
    assert code == 0, "".join(errors)[-3000:]
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"jaeger{p.pid % 100000}" not in ns
