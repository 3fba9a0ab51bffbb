"""haproxy: config rendering (pure), and the real server (Debian's package) in an ephemeral lab
in front of two slow fake backends: requests spread over both, the global maxconn reached
(seen in the stats socket), a timeout server shorter than the backend (a 504 whose log line
haproxy's termination state explains: ``juice.trace.lblog``), stopped with nothing left."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from juice.errors import ServiceError, UserError
from juice.lab import LocalLab, spec
from juice.lab.setns import in_site
from juice.services.balancers.haproxy import (
    FRONT_OFFSET,
    HAPROXY,
    Backend,
    ConnSampler,
    Frontend,
    HAProxy,
    deviations,
    fd_limit,
    parse_info,
    parse_stat,
    render_config,
)
from juice.services.process import spawn, stop_all
from juice.trace import lblog
from tests.services.conftest import FakeSites, needs_lab


def test_render_config_frontend_per_service_and_global_maxconn() -> None:
    fes = [Frontend("keystone", 15000, (Backend("keystone-s1", "10.210.1.2", 5000),
                                        Backend("keystone-s2", "10.210.2.2", 5000))),
           Frontend("placement", 18778, (Backend("placement-s1", "10.210.1.2", 8778),))]
    cfg = render_config(fes, bind_ip="10.210.1.2", stats_socket=Path("/x/haproxy.sock"), maxconn=4000)
    glob = cfg.split("defaults")[0]
    assert "    maxconn 4000" in glob.splitlines()
    assert "stats socket /x/haproxy.sock" in glob
    assert "bind 10.210.1.2:15000" in cfg and "bind 10.210.1.2:18778" in cfg
    assert "server keystone-s2 10.210.2.2:5000" in cfg
    assert cfg.count("balance roundrobin") == 2
    assert "timeout server 50000" in cfg  # Debian's shipped defaults section
    # unset: haproxy's own default (no maxconn line at all)
    plain = render_config(fes, bind_ip="10.210.1.2", stats_socket=Path("/x/s"), maxconn=None)
    assert "maxconn" not in plain


@pytest.mark.parametrize("bad", [0, -5, 2_000_000, True, "many"])
def test_bad_maxconn_is_one_line_user_error(bad: object) -> None:
    with pytest.raises(UserError, match=r"haproxy.maxconn: expected 1\.\.") as e:
        HAProxy(FakeSites(), site=1, maxconn=bad)  # type: ignore[arg-type]
    assert "\n" not in str(e.value)


def test_unknown_site_and_empty_frontend() -> None:
    with pytest.raises(UserError, match="haproxy.site: 7"):
        HAProxy(FakeSites(), site=7)  # type: ignore[arg-type]
    hp = HAProxy(FakeSites(), site=1)  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="needs at least one server"):
        hp.add("nova", 8774, [])
    hp.add("nova", 8774, [(1, "10.210.1.2", 8774)])
    assert hp.url("nova") == f"http://10.210.1.2:{8774 + FRONT_OFFSET}"


def test_fd_limit_follows_maxconn_and_is_absent_without_it() -> None:
    assert fd_limit(None) == []
    assert fd_limit(16_000) == ["prlimit", "--nofile=33024:33024", "--"]  # above a 20,000 hard limit
    assert fd_limit(1_000_000) == ["prlimit", f"--nofile={1 << 20}:{1 << 20}", "--"]


def test_deviations_only_when_set() -> None:
    assert deviations(None) == []
    (d,) = deviations(16000)
    assert (d.server, d.option, d.value, d.source) == ("haproxy", "global maxconn", "16000", "spec")
    (t,) = deviations(None, 180.0)
    assert (t.option, t.value, t.default, t.source) == ("defaults timeout server (s)", "180", "50", "spec")


def test_timeout_server_replaces_debians_and_bad_ones_name_the_field() -> None:
    fes = [Frontend("nova-api", 18774, (Backend("nova-api-s1", "10.210.1.2", 8774),))]
    cfg = render_config(fes, bind_ip="10.210.1.2", stats_socket=Path("/x/s"), timeout_server_s=0.5)
    assert "    timeout server 500" in cfg.splitlines() and "timeout server 50000" not in cfg
    assert "    timeout client 50000" in cfg.splitlines()  # the other Debian timeouts stay
    for bad in (0, -1, 100_000, True, "long"):
        with pytest.raises(UserError, match=r"server\.haproxy_timeout_server: expected seconds") as e:
            HAProxy(FakeSites(), site=1, timeout_server_s=bad)  # type: ignore[arg-type]
        assert "\n" not in str(e.value)


def test_parse_stat_and_info() -> None:
    text = ("# pxname,svname,qcur,qmax,scur,smax,slim,stot,\n"
            "web,FRONTEND,,,1,2,2,7,\nweb,web-s1,0,0,1,1,,4,\nweb,BACKEND,0,0,1,1,2,7,\n\n")
    rows = parse_stat(text)
    assert [r["svname"] for r in rows] == ["FRONTEND", "web-s1", "BACKEND"]
    assert rows[0]["slim"] == "2" and rows[1]["stot"] == "4"
    info = parse_info("Name: HAProxy\nVersion: 2.6.12\nMaxconn: 2\nCurrConns: 0\n")
    assert info["Maxconn"] == "2" and info["Version"] == "2.6.12"
    with pytest.raises(ServiceError, match="unexpected"):
        parse_stat("Unknown command\n")


SLOW_PY = """import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(float(sys.argv[3]))
        body = sys.argv[4].encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""


def _get(url: str) -> tuple[str, float]:
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode(), time.monotonic() - t0


needs_haproxy = pytest.mark.skipif(shutil.which("haproxy") is None and not Path(HAPROXY).exists(),
                                   reason="haproxy missing: run scripts/setup.sh")


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
@needs_haproxy
def test_haproxy_real_roundrobin_and_maxconn_reached(lab_name: str) -> None:
    sleep_s = 1.0
    with LocalLab.up(spec.parse({"name": lab_name, "sites": 2, "delay_ms": 0}), ephemeral=True) as lab:
        fakes = []
        for s in (1, 2):  # a fake-server backend per site (not what is under test)
            place = lab.place(s)
            place.write(place.root / f"slow{s}.py", SLOW_PY)
            fakes.append(spawn(place, ["python3", str(place.root / f"slow{s}.py"), place.address, "9100",
                                       str(sleep_s), f"backend-{s}"],
                               log=place.root / f"slow{s}.log", what=f"fake backend {s}"))
        hp = HAProxy(lab, site=1, maxconn=2)
        hp.add("web", 9100, [(1, lab.site_ip(1), 9100), (2, lab.site_ip(2), 9100)])
        try:
            for f in fakes:
                f.wait_ready(lambda f=f: f.place.tcp_open(f.place.address, 9100), 30)  # type: ignore[misc]
            hp.up(timeout=30)
            pid = hp.server.pid if hp.server else None
            assert pid and hp.info()["Maxconn"] == "2"
            # started through prlimit, which exec'd haproxy in place: the recorded pid is haproxy
            # with the file descriptors its maxconn needs (2 x 2 + 1024)
            assert Path(f"/proc/{pid}/comm").read_text().strip() == "haproxy"
            limits = Path(f"/proc/{pid}/limits").read_text()
            assert [ln.split()[3:5] for ln in limits.splitlines() if ln.startswith("Max open files")] == \
                [["1028", "1028"]]
            assert hp.facts()["haproxy_version"].startswith("2.")
            url = hp.url("web") + "/"
            # 6 requests at once through a limit of 2 connections: served 2 at a time
            got: list[tuple[str, float]] = []
            lock = threading.Lock()

            def one() -> None:
                r = in_site(lab.site_ns(2), lambda: _get(url), timeout=60)
                with lock:
                    got.append(r)

            threads = [threading.Thread(target=one) for _ in range(6)]
            with ConnSampler(hp, interval_s=0.2) as sampler:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(90)
            sampled = sampler.result()
            # the process sat at its global limit while the requests waited (seen in show info)
            assert sampled["maxconn"] == 2 and sampled["max_curr_conns"] == 2 and sampled["at_limit"] >= 1
            assert len(got) == 6
            assert {body for body, _ in got} == {"backend-1", "backend-2"}  # round robin
            fe = next(r for r in hp.stats() if r["pxname"] == "web" and r["svname"] == "FRONTEND")
            assert fe["slim"] == "2" and fe["smax"] == "2"   # the limit was reached...
            assert int(fe["stot"]) == 6                      # ...and every connection got through
            # the waiting is visible: the last request waited behind the first two rounds
            assert max(d for _, d in got) >= 2 * sleep_s
            per_server = hp.requests_by_server("web")
            assert set(per_server) == {"web-s1", "web-s2"} and sum(per_server.values()) == 6
            log = lab.place(1).read(hp.log) or b""
            assert b"web web/web-s" in log  # httplog lines: frontend backend/server
            answers = [a for a in map(lblog.parse_line, log.decode().splitlines()) if a is not None]
            assert len(answers) == 6 and {(a.status, a.term) for a in answers} == {(200, "--")}
            assert all(a.method == "GET" and a.uri == "/" and a.tr_ms >= 900 for a in answers)
            # a timeout server shorter than the backend's answer: a 504, and haproxy's log says why
            short = HAProxy(lab, site=2, timeout_server_s=0.3)
            short.add("slow", 9300, [(1, lab.site_ip(1), 9100)])
            short.up(timeout=30)
            try:
                with pytest.raises(urllib.error.HTTPError, match="504"):
                    in_site(lab.site_ns(1), lambda: _get(short.url("slow") + "/x/123"), timeout=60)
                # haproxy logs a request once it has answered it: on a loaded host the line can
                # come after the client has its 504, so wait for it (bounded) before stopping
                rows = lblog.summary([short.log])
                for _ in range(100):
                    if rows:
                        break
                    time.sleep(0.1)
                    rows = lblog.summary([short.log])
            finally:
                short.stop()
            assert [(r["frontend"], r["status"], r["term"], r["request"], r["count"]) for r in rows] == \
                [("slow", 504, "sH", "GET /x/<id>", 1)]
            assert 0.25 <= rows[0]["max_s"] < sleep_s
            said = lblog.lb_verdict("upstream refused or timed out (load balancer or API)", rows) or ""
            assert "504 sH (the server-side timeout struck while waiting for the server's response" in said
            # a maxconn whose descriptors the site cannot have is refused before anything starts,
            # naming the field, the limit and the fix (where the hard limit can be raised, it is)
            big = HAProxy(lab, site=2, maxconn=1_000_000)
            big.add("web", 9200, [(2, lab.site_ip(2), 9100)])
            can = subprocess.run(["prlimit", f"--nofile={1 << 20}:{1 << 20}", "true"],
                                 capture_output=True, check=False).returncode == 0
            if can:
                big.configure()
            else:
                with pytest.raises(ServiceError, match=r"haproxy\.maxconn: 1000000 needs 1048576 file "
                                                       r"descriptors .* use a maxconn of at most \d+"):
                    big.configure()
        finally:
            hp.stop()
            stop_all(fakes, grace_s=5)
        assert pid is not None and not lab.place(1).alive((pid, None))
