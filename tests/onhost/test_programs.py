"""The programs run at a place (``juice.onhost``), run here: their functions imported, and each
program's shipped source run as the place runs it (``python -c SOURCE ARGV...``)."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from juice import onhost
from juice.onhost import (
    amqp_declare,
    dists,
    http_get,
    keystone_api,
    memcached_stats,
    osprofiler_reader,
    unix_socket,
)
from juice.paths import cache_dir

PACKAGE = Path(onhost.__file__).parent
# what a program run with a venv's Python may import from that venv (inside a function: the
# module itself imports here), and the one written beside Keystone's WSGI module
VENV_IMPORTS = {"osprofiler_reader": {"oslo_config", "osprofiler"}, "amqp_declare": {"amqp"},
                "keystone_wsgi": {"keystone", "juice_gc_probe"}}
# what a program shipped with others (``juice.hosts.bundle``) imports of them
SHIPPED_WITH = {"sampler": {"juice.onhost.procfs", "juice.onhost"}}


def _run(name: str, *argv: str, python: str = sys.executable,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c <source of name> argv...`` from a directory where ``juice`` is not importable."""
    return subprocess.run([python, "-c", onhost.source(name), *argv], capture_output=True, text=True,
                          timeout=60, cwd="/", env={"PATH": os.environ.get("PATH", ""), **(env or {})})


def test_every_program_imports_the_standard_library_only_and_nothing_of_juice() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        top = {n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
        allowed = VENV_IMPORTS.get(path.stem, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                assert not isinstance(node, ast.ImportFrom), f"{path.name}: a relative import"
                continue
            for name in names:
                root = name.split(".")[0]
                if root in sys.stdlib_module_names or root == "__future__":
                    continue
                if name in SHIPPED_WITH.get(path.stem, set()):
                    continue
                assert root in allowed, f"{path.name} imports {name}"
                # a venv's module is imported where the program runs, not when a test imports it
                assert path.stem == "keystone_wsgi" or node not in top, f"{path.name}: {name} at top"


def test_the_programs_run_with_a_hosts_own_python3_parse_as_python_3_7() -> None:
    for name in ("http_get", "unix_socket", "memcached_stats", "procfs", "sampler"):
        ast.parse(onhost.source(name), name, feature_version=(3, 7))


# ---- http_get ------------------------------------------------------------------------------

@pytest.fixture
def http_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"ok": true}'
            self.send_response(200 if self.path == "/ok" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_http_get_returns_the_body_or_exits_naming_the_error(http_server: str) -> None:
    assert http_get.get(http_server + "/ok", 5.0) == b'{"ok": true}'
    assert http_get.get(http_server + "/ok", 5.0, max_bytes=3) == b'{"o'
    ok = _run("http_get", http_server + "/ok", "5")
    assert (ok.returncode, ok.stdout) == (0, '{"ok": true}')
    bad = _run("http_get", http_server + "/missing", "5")
    assert bad.returncode == 1 and bad.stderr.strip() == (
        f"GET {http_server}/missing: HTTPError: HTTP Error 404: Not Found")


# ---- unix_socket ---------------------------------------------------------------------------

def test_a_command_on_a_unix_socket_gets_the_whole_answer(tmp_path: Path) -> None:
    path = str(tmp_path / "stats.sock")
    answer = b"Name: HAProxy\nPid: 42\n" + b"x" * 200_000 + b"\n"
    got: list[bytes] = []
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen()

    def serve() -> None:
        for _ in range(2):
            c, _ = srv.accept()
            with c:
                got.append(c.recv(1024))
                c.sendall(answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        assert unix_socket.command(path, "show info") == answer
        r = _run("unix_socket", path, "show stat")
        assert r.returncode == 0 and r.stdout == answer.decode()
    finally:
        t.join(10)
        srv.close()
    assert got == [b"show info\n", b"show stat\n"]


# ---- memcached_stats -----------------------------------------------------------------------

def test_memcached_stats_are_parsed_from_the_stat_lines() -> None:
    text = "STAT pid 123\r\nSTAT uptime 5\r\nSTAT version 1.6.21\r\nnoise\r\nSTAT a b c\r\nEND\r\n"
    assert memcached_stats.parse(text) == {"pid": "123", "uptime": "5", "version": "1.6.21"}


def test_memcached_stats_read_until_end() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve() -> None:
        for _ in range(2):
            c, _ = srv.accept()
            with c:
                assert c.recv(64) == b"stats\r\n"
                c.sendall(b"STAT pid 7\r\n")
                c.sendall(b"STAT curr_connections 2\r\nEND\r\n")  # the connection stays open

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        assert memcached_stats.stats("127.0.0.1", port) == {"pid": "7", "curr_connections": "2"}
        r = _run("memcached_stats", "127.0.0.1", str(port))
        assert r.returncode == 0 and json.loads(r.stdout) == {"pid": "7", "curr_connections": "2"}
    finally:
        t.join(10)
        srv.close()


# ---- dists ---------------------------------------------------------------------------------

def test_dists_versions_and_require() -> None:
    import importlib.metadata

    pytest_version = importlib.metadata.version("pytest")
    assert dists.versions(["pytest", "juice-no-such-dist"]) == {"pytest": pytest_version,
                                                                "juice-no-such-dist": "unknown"}
    assert dists.require("json.decoder", "pytest") == pytest_version
    with pytest.raises(SystemExit, match="no module juice_no_such_module"):
        dists.require("juice_no_such_module", "pytest")
    r = _run("dists", "versions", "pytest", "juice-no-such-dist")
    assert json.loads(r.stdout) == {"pytest": pytest_version, "juice-no-such-dist": "unknown"}
    r = _run("dists", "require", "json.decoder", "pytest")
    assert (r.returncode, r.stdout) == (0, pytest_version + "\n")
    r = _run("dists", "require", "json.juice_none", "pytest")
    assert (r.returncode, r.stderr.strip()) == (1, "no module json.juice_none")
    r = _run("dists", "require", "json", "juice-no-such-dist")  # the last line says which
    assert r.returncode == 1 and "juice-no-such-dist" in r.stderr.strip().splitlines()[-1]


# ---- keystone_api --------------------------------------------------------------------------

ADMIN = {"OS_USERNAME": "admin", "OS_PASSWORD": "pw", "OS_PROJECT_NAME": "admin"}


class FakeKeystone:
    """Keystone's identity API, as much as ``keystone_api`` uses, in a thread."""

    def __init__(self, password: str = "pw") -> None:
        self.regions = {"Region1"}
        self.endpoints = [{"region_id": "Region1", "interface": i} for i in ("public", "internal", "admin")]
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        ks = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, doc: Any = None, headers: dict[str, str] | None = None) -> None:
                body = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with ks.lock:
                    ks.requests.append(("POST", self.path))
                if self.path == "/v3/auth/tokens":
                    ident = body["auth"]["identity"]
                    good = (ident["methods"] == ["token"] and ident["token"]["id"] == "tok") or (
                        ident["methods"] == ["password"]
                        and ident["password"]["user"]["password"] == password)
                    return self._answer(201 if good else 401, {}, {"X-Subject-Token": "tok"})
                if self.headers["X-Auth-Token"] != "tok":
                    return self._answer(401)
                with ks.lock:
                    if self.path == "/v3/regions":
                        ks.regions.add(body["region"]["id"])
                    elif self.path == "/v3/endpoints":
                        ks.endpoints.append(body["endpoint"])
                return self._answer(201, {})

            def do_GET(self) -> None:
                with ks.lock:
                    ks.requests.append(("GET", self.path))
                if self.headers["X-Auth-Token"] != "tok":
                    return self._answer(401)
                if self.path == "/v3/services?type=identity":
                    return self._answer(200, {"services": [{"id": "sid"}]})
                if self.path == "/v3/regions":
                    return self._answer(200, {"regions": [{"id": r} for r in sorted(ks.regions)]})
                if self.path == "/v3/endpoints?service_id=sid":
                    return self._answer(200, {"endpoints": list(ks.endpoints)})
                if self.path == "/v3/auth/tokens":
                    return self._answer(200 if self.headers["X-Subject-Token"] == "tok" else 404, {})
                return self._answer(200, {})

            def log_message(self, *args: Any) -> None:
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v3"

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def keystone() -> Iterator[FakeKeystone]:
    ks = FakeKeystone()
    yield ks
    ks.close()


def test_regions_and_their_endpoints_are_added_once(keystone: FakeKeystone) -> None:
    want = [["Region1", "http://a/v3"], ["Region2", "http://b/v3"], ["Region3", "http://c/v3"]]
    keystone_api.register_regions(keystone.url, want, ADMIN)
    assert keystone.regions == {"Region1", "Region2", "Region3"}
    assert sorted((e["region_id"], e["interface"]) for e in keystone.endpoints) == sorted(
        (r, i) for r in ("Region1", "Region2", "Region3") for i in ("public", "internal", "admin"))
    assert {e["url"] for e in keystone.endpoints if "url" in e} == {"http://b/v3", "http://c/v3"}
    changes = [r for r in keystone.requests if r in (("POST", "/v3/regions"), ("POST", "/v3/endpoints"))]
    assert len(changes) == 2 + 6
    before = len(keystone.requests)
    r = _run("keystone_api", "regions", keystone.url, json.dumps(want), env=ADMIN)  # idempotent
    assert r.returncode == 0, r.stderr
    assert keystone.requests[before:] == [("POST", "/v3/auth/tokens"), ("GET", "/v3/services?type=identity"),
                                          ("GET", "/v3/regions"), ("GET", "/v3/endpoints?service_id=sid")]


def test_regions_exit_naming_the_refused_request(keystone: FakeKeystone) -> None:
    with pytest.raises(SystemExit, match=r"keystone POST /auth/tokens: 401"):
        keystone_api.register_regions(keystone.url, [], {**ADMIN, "OS_PASSWORD": "wrong"})
    r = _run("keystone_api", "regions", keystone.url, "[]", env={**ADMIN, "OS_PASSWORD": "wrong"})
    assert r.returncode == 1 and r.stderr.startswith("keystone POST /auth/tokens: 401")


def test_prewarm_sends_requests_that_hash_no_password(keystone: FakeKeystone) -> None:
    assert keystone_api.prewarm(keystone.url, 8, 3, ADMIN) == {"requests": 9, "errors": 0}
    assert keystone.requests.count(("POST", "/v3/auth/tokens")) == 1 + 2  # one password, two re-scopes
    assert sorted(set(keystone.requests)) == [("GET", "/v3/auth/tokens"), ("GET", "/v3/projects"),
                                              ("GET", "/v3/users"), ("POST", "/v3/auth/tokens")]
    r = _run("keystone_api", "prewarm", keystone.url, "4", "2", env=ADMIN)
    assert json.loads(r.stdout) == {"requests": 5, "errors": 0}
    r = _run("keystone_api", "prewarm", keystone.url, "4", "2", env={**ADMIN, "OS_PASSWORD": "wrong"})
    assert (r.returncode, r.stderr.strip()) == (1, "keystone POST /auth/tokens: 401")


# ---- keystone_wsgi + gc_probe --------------------------------------------------------------

def test_the_keystone_wsgi_module_empties_argv_before_keystone_then_logs_collections(tmp_path: Path) -> None:
    fake = tmp_path / "keystone" / "wsgi"
    fake.mkdir(parents=True)
    (tmp_path / "keystone" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "api.py").write_text("import sys\napplication = list(sys.argv)\n")
    (tmp_path / "juice_keystone_wsgi.py").write_text(onhost.source("keystone_wsgi"))
    (tmp_path / "juice_gc_probe.py").write_text(onhost.source("gc_probe"))
    r = subprocess.run([sys.executable, "-c", "import gc, sys\nsys.argv[1:] = ['-b', 'x']\n"
                        "import juice_keystone_wsgi as m\ngc.collect()\nprint(m.application)"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path, check=True)
    assert r.stdout.strip() == "['-c']"
    first, *collections = r.stderr.splitlines()
    assert first.startswith("juice-gc pid=") and " start objects=" in first
    assert collections and all(" gen=2 collected=" in line for line in collections)  # gc.collect()'s at least


def test_the_api_wsgi_module_empties_argv_before_importing_the_app_it_was_given(tmp_path: Path) -> None:
    from juice.services.openstack.os_api import argv_shim

    (tmp_path / "fakeapp").mkdir()
    (tmp_path / "fakeapp" / "__init__.py").write_text("")
    (tmp_path / "fakeapp" / "wsgi.py").write_text("import sys\napp = list(sys.argv)\n")
    (tmp_path / "juice_fake_api_wsgi.py").write_text(argv_shim("fakeapp.wsgi", "app"))
    r = subprocess.run([sys.executable, "-c", "import sys\nsys.argv[1:] = ['-b', 'x']\n"
                        "import juice_fake_api_wsgi as m\nprint(m.application, m.APP)"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path, check=True)
    assert r.stdout.strip() == "['-c'] ('fakeapp.wsgi', 'app')"


# ---- osprofiler_reader ---------------------------------------------------------------------

class FakeRedis:
    def __init__(self, lists: dict[str, list[str]]) -> None:
        self.lists = lists

    def lrange(self, key: str, start: int, stop: int) -> list[str]:
        assert (start, stop) == (0, -1)
        return list(self.lists.get(key, []))

    def delete(self, key: str) -> None:
        self.lists.pop(key, None)


class FakeDriver:
    namespace_opt = "ns:"

    def __init__(self, lists: dict[str, list[str]]) -> None:
        self.db = FakeRedis(lists)


def test_the_reader_returns_each_trace_in_stored_order_and_deletes_it(tmp_path: Path) -> None:
    # OSProfiler's redis driver pushes each notification at the head: newest first
    drv = FakeDriver({"ns:t1": ['{"n": 2}', '{"n": 1}'], "ns:t2": ['{"n": 3}'], "ns:other": ["{}"]})
    assert osprofiler_reader.read(drv, ["t1", "t2", "t3"]) == {"t1": [{"n": 1}, {"n": 2}],
                                                               "t2": [{"n": 3}], "t3": []}
    assert drv.db.lists == {"ns:other": ["{}"]}
    out = str(tmp_path / "doc.json")
    osprofiler_reader.write(out, {"format": osprofiler_reader.FORMAT})
    assert json.loads(Path(out).read_text()) == {"format": 1} and not Path(out + ".tmp").exists()


def test_the_reader_runs_in_the_openstack_venv(tmp_path: Path) -> None:
    python = cache_dir() / "openstack" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{python} missing: run scripts/setup.sh (OpenStack venv)")
    out = tmp_path / "traces.json"
    r = _run("osprofiler_reader", "redis://127.0.0.1:1", str(out), python=str(python))  # no id: no request
    assert (r.returncode, r.stdout) == (0, "0\n"), r.stderr
    doc = json.loads(out.read_text())
    assert doc["format"] == osprofiler_reader.FORMAT and doc["backend"] == "redis" and doc["traces"] == {}
    assert doc["osprofiler"]


# ---- amqp_declare --------------------------------------------------------------------------

class FakeChannel:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: self.calls.append((name, a, kw))


def test_declare_makes_the_exchanges_and_each_queue_bound_with_its_name() -> None:
    spec = {"user": "u", "password": "p", "exchange": "openstack", "remote": "juice.remote",
            "durable": True, "queues": ["conductor", "scheduler"], "arguments": {"x-queue-type": "quorum"}}
    ch = FakeChannel()
    assert amqp_declare.declare(ch, spec) == ["conductor", "scheduler"]
    assert ch.calls == [
        ("exchange_declare", ("openstack", "topic"), {"durable": True, "auto_delete": False}),
        ("exchange_declare", ("juice.remote", "fanout"), {"durable": False, "auto_delete": False}),
        ("exchange_bind", (), {"destination": "openstack", "source": "juice.remote", "routing_key": ""}),
        ("queue_declare", ("conductor",), {"durable": True, "auto_delete": False,
                                           "arguments": {"x-queue-type": "quorum"}}),
        ("queue_bind", ("conductor", "openstack"), {"routing_key": "conductor"}),
        ("queue_declare", ("scheduler",), {"durable": True, "auto_delete": False,
                                           "arguments": {"x-queue-type": "quorum"}}),
        ("queue_bind", ("scheduler", "openstack"), {"routing_key": "scheduler"}),
    ]
