"""``juice export openmetrics``: the text is read back by a strict parser written here to the
OpenMetrics 1.0 / Prometheus 0.0.4 exposition formats (``prometheus_client`` is not in the
lock, scripts/lock/juice.txt), and its values are the runs' own (juice.results.samples,
juice.profile.frames)."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from juice.profile.table import METRIC_INDEX, Writer
from juice.report.openmetrics import Family, escape_label, label_name, render
from juice.results.samples import units
from tests.sla.test_cli_sla import OLD, RALLY_FILE, ROOT

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
VALUE = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|NaN)"
TYPES = {"counter", "gauge", "histogram", "gaugehistogram", "stateset", "info", "summary", "unknown",
         "untyped"}
Series = dict[tuple[tuple[str, str], ...], float]
STAMPS: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}  # the last parse's timestamps


def _unescape(s: str, allowed: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            nxt = s[i + 1] if i + 1 < len(s) else ""
            assert nxt in allowed, f"bad escape \\{nxt} in {s!r}"
            out.append("\n" if nxt == "n" else nxt)
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _labels(body: str) -> list[tuple[str, str]]:
    """``name="value",...`` read character by character (no regex shortcuts on escapes)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        m = re.compile(rf"({LABEL})=\"").match(body, i)
        assert m, f"bad label at {body[i:]!r}"
        i = m.end()
        j = i
        while body[j] != '"':
            assert body[j] != "\n"
            j += 2 if body[j] == "\\" else 1
        out.append((m.group(1), _unescape(body[i:j], '\\"n')))
        i = j + 1
        if i < len(body):
            assert body[i] == ",", f"expected , at {body[i:]!r}"
            i += 1
    names = [k for k, _ in out]
    assert len(set(names)) == len(names), f"label repeated: {names}"
    assert not any(k.startswith("__") for k in names)
    return out


def parse(text: str, openmetrics: bool) -> dict[str, tuple[str, str, Series]]:
    """family -> (type, help, series): every line checked; families contiguous, declared before
    their samples, never repeated; each series once; OpenMetrics ends with one ``# EOF``."""
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    if openmetrics:
        assert lines[-1] == "# EOF" and lines.count("# EOF") == 1
        lines = lines[:-1]
    fams: dict[str, tuple[str, str, Series]] = {}
    STAMPS.clear()
    current = ""
    meta: dict[str, dict[str, str]] = {}
    for line in lines:
        assert line and line == line.strip(), f"blank or padded line {line!r}"
        if line.startswith("#"):
            m = re.fullmatch(rf"# (HELP|TYPE|UNIT) ({NAME}) (.*)", line)
            assert m, f"bad comment line {line!r}"
            kind, name, rest = m.groups()
            if name != current:
                assert name not in fams and name not in meta, f"family {name} split"
                current = name
            assert kind not in meta.setdefault(name, {}), f"second {kind} for {name}"
            if kind == "TYPE":
                assert rest in TYPES
            if kind == "HELP":
                rest = _unescape(rest, '\\n"' if openmetrics else "\\n")
            if kind == "UNIT":
                assert openmetrics and name.endswith("_" + rest)
            meta[name][kind] = rest
            continue
        stamp = r"-?[0-9]+(?:\.[0-9]+)?" if openmetrics else r"-?[0-9]+"  # s / integer ms
        m = re.fullmatch(rf"({NAME})(?:\{{(.*)\}})? ({VALUE})(?: ({stamp}))?", line)
        assert m, f"bad sample line {line!r}"
        name, body, value, at = m.groups()
        assert name == current and "TYPE" in meta.get(name, {}), f"{name}: sample outside its family"
        fam = fams.setdefault(name, (meta[name]["TYPE"], meta[name].get("HELP", ""), {}))
        key = tuple(_labels(body or ""))
        assert key not in fam[2], f"series repeated: {name}{key}"
        fam[2][key] = float(value.replace("Inf", "inf").replace("NaN", "nan"))
        if at is not None:
            STAMPS[(name, key)] = float(at) if openmetrics else float(at) / 1000.0
    return fams


def _profiled_run(tmp_path: Path) -> Path:
    """A copy of an old run with a profile.parquet: keystone pid 101 (2 s of CPU over 4 s,
    then idle), its RSS peaking at 300 MB; a link row (pid 0) that is not a process."""
    src = next(d for d in sorted(OLD.iterdir()) if (d / "manifest.json").is_file())
    run = tmp_path / "results" / src.name
    shutil.copytree(src, run)
    w = Writer(run)
    comps = ["keystone", "link"]
    for t, cpu, rss in ((0.0, 0.0, 100e6), (2.0, 1.0, 300e6), (4.0, 2.0, 200e6), (6.0, 2.0, 150e6)):
        w.rows.add(1000.0 + t, 1, 0, 101, METRIC_INDEX["cpu_user_s"], cpu)
        w.rows.add(1000.0 + t, 1, 0, 101, METRIC_INDEX["cpu_system_s"], 0.0)
        w.rows.add(1000.0 + t, 1, 0, 101, METRIC_INDEX["rss_bytes"], rss)
        w.rows.add(1000.0 + t, 1, 1, 0, METRIC_INDEX["net_in_bytes"], t * 1e6)
    w.finish(comps)
    return run


def juice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "juice.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)


def _one(series: Series, **want: str) -> float:
    found = [v for k, v in series.items() if all(dict(k).get(a) == b for a, b in want.items())]
    assert len(found) == 1, (want, len(found))
    return found[0]


@pytest.mark.parametrize("fmt", ["openmetrics", "prometheus"])
def test_export_parses_and_holds_the_runs_values(tmp_path: Path, fmt: str) -> None:
    profiled = _profiled_run(tmp_path)
    out = tmp_path / "out" / "juice.prom"
    cp = juice("export", "openmetrics", str(OLD), str(RALLY_FILE), str(profiled), "--format", fmt,
               "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    fams = parse(out.read_text(), fmt == "openmetrics")
    want = units([OLD, RALLY_FILE, profiled])
    runs = {dict(k)["run"] for k in fams["juice_run_iterations"][2]}
    assert len(runs) == len(want)  # the profiled copy shares a run name: kept apart
    assert all(t == "gauge" and h for t, h, _ in fams.values())
    label_names = {tuple(k for k, _ in key) for key in fams["juice_run_iterations"][2]}
    assert len(label_names) == 1  # every run the same label names
    rally = next(u for u in want if u.kind == "rally")
    its = fams["juice_run_iterations"][2]
    assert _one(its, run=rally.name, workload="rally") == len(rally.iterations or [])
    assert _one(fams["juice_run_failures"][2], run=rally.name) == sum(
        1 for d in rally.iterations or [] if d.get("error"))
    for u in want[:3]:
        for sample, vals in u.samples.items():
            assert _one(fams["juice_run_samples"][2], run=u.name, sample=sample) == len(vals)
            got = _one(fams["juice_run_sample_mean_seconds"][2], run=u.name, sample=sample)
            assert math.isclose(got, float(np.mean(vals)), rel_tol=1e-12)
            got = _one(fams["juice_run_sample_p95_seconds"][2], run=u.name, sample=sample)
            assert math.isclose(got, float(np.percentile(vals, 95)), rel_tol=1e-12)
    params = rally.meta["params"]
    row = dict(next(k for k in its if dict(k)["run"] == rally.name))
    assert row[label_name("runner.times")] == str(params["runner.times"])
    cpu = fams["juice_profile_cpu_peak_percent"][2]
    assert len(cpu) == 1 and _one(cpu, component="keystone", pid="101", site="1") == 50.0
    rss = fams["juice_profile_rss_peak_bytes"][2]
    assert len(rss) == 1 and _one(rss, component="keystone") == 300e6
    assert (fmt == "openmetrics") == ("# UNIT juice_profile_rss_peak_bytes bytes" in out.read_text())


def test_timestamps_stamp_every_sample_at_its_runs_start(tmp_path: Path) -> None:
    from juice.report.openmetrics import started

    want = {u.name: started(u) for u in units([OLD, RALLY_FILE])}
    for fmt in ("openmetrics", "prometheus"):
        cp = juice("export", "openmetrics", str(OLD), str(RALLY_FILE), "--timestamps", "--format", fmt)
        assert cp.returncode == 0, cp.stderr
        fams = parse(cp.stdout, fmt == "openmetrics")
        n = sum(len(series) for _, _, series in fams.values())
        assert n == len(STAMPS) > 0
        for (_, key), at in STAMPS.items():
            assert math.isclose(at, want[dict(key)["run"]] or math.nan, abs_tol=1e-3)


def test_label_values_and_names_are_escaped_and_valid() -> None:
    nasty = 'a\\b "quoted"\nnext'
    fam = Family("juice_x", 'help with \\ and "quotes"\nand a line', "",
                 [({"run": nasty, label_name("9 odd-key.x"): "v"}, float("nan")),
                  ({"run": "b", label_name("9 odd-key.x"): ""}, float("inf"))])
    for fmt in ("openmetrics", "prometheus"):
        fams = parse(render([fam], fmt), fmt == "openmetrics")
        _, help_text, series = fams["juice_x"]
        assert help_text == 'help with \\ and "quotes"\nand a line'
        runs = {dict(k)["run"]: v for k, v in series.items()}
        assert math.isnan(runs[nasty]) and runs["b"] == math.inf
    assert escape_label(nasty) == 'a\\\\b \\"quoted\\"\\nnext'
    assert re.fullmatch(LABEL, label_name("9 odd-key.x")) and not label_name("_x", "_").startswith("__")


def test_the_parser_refuses_what_the_formats_forbid() -> None:
    good = "# HELP a x\n# TYPE a gauge\na{b=\"1\"} 1\n# EOF\n"
    assert parse(good, True)["a"][2] == {(("b", "1"),): 1.0}
    for bad in ("# TYPE a gauge\na{b=\"1\"} 1\n",                        # no # EOF
                "# TYPE a gauge\na{b=\"1\\x\"} 1\n# EOF\n",                # bad escape
                "# TYPE a gauge\na{b=\"1\"} 1\na{b=\"1\"} 2\n# EOF\n",     # series twice
                "# TYPE a gauge\n# TYPE c gauge\na 1\n# EOF\n",            # sample outside family
                "# TYPE 1a gauge\n1a 1\n# EOF\n",                          # bad name
                "# TYPE a gauge\na{__b=\"1\"} 1\n# EOF\n",                 # reserved label
                "# TYPE a gauge\na 1 2 3\n# EOF\n"):                       # junk after the value
        with pytest.raises(AssertionError):
            parse(bad, True)


def test_served_export_follows_the_results_as_runs_arrive(tmp_path: Path) -> None:
    """``--serve``: each scrape renders the results as stored then (a run copied in appears at the
    next render), parses strictly, and carries the server's own families."""
    import threading
    import urllib.request

    from juice.report.omserve import Renderer, server

    runs = sorted(p for p in OLD.iterdir() if (p / "manifest.json").is_file())
    assert len(runs) >= 2
    results = tmp_path / "results"
    results.mkdir()
    shutil.copytree(runs[0], results / runs[0].name)
    httpd = server(Renderer([results], "openmetrics", min_interval_s=0.0), "127.0.0.1", 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            first = parse(r.read().decode(), True)
        assert {dict(k)["run"] for k in first["juice_run_iterations"][2]} == {runs[0].name}
        assert list(first["juice_export_runs"][2].values()) == [1.0]
        shutil.copytree(runs[1], results / runs[1].name)
        with urllib.request.urlopen(url, timeout=30) as r:
            second = parse(r.read().decode(), True)
        assert {dict(k)["run"] for k in second["juice_run_iterations"][2]} == {runs[0].name, runs[1].name}
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=30)
        assert e.value.code == 404
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_served_export_renders_at_most_every_interval(tmp_path: Path) -> None:
    from juice.report.omserve import Renderer

    now = [0.0]
    r = Renderer([OLD], "prometheus", min_interval_s=5.0, clock=lambda: now[0])
    text = r.text()
    assert r.text() == text and r.renders == 1
    now[0] = 5.0
    r.text()
    assert r.renders == 2
    assert "juice_export_runs " in text and "# EOF" not in text


@pytest.mark.parametrize("address", ["0.0.0.0:9464", "example.org:80", "99999"])
def test_serve_refuses_what_is_not_a_loopback_port(address: str) -> None:
    cp = juice("export", "openmetrics", str(OLD), "--serve", address)
    assert cp.returncode == 2, cp.stderr
    assert "--serve" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1, cp.stderr
