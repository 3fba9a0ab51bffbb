"""``juice sla --junit FILE``: the verdicts as JUnit XML, read back with xml.etree and checked
against the judge's own results on the stored fixtures (old Juice runs, a real Rally file)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from juice.cli.sla import load_criteria
from juice.results.samples import units
from juice.sla.judge import judge
from juice.sla.junit import Judged, to_text
from tests.sla.test_cli_sla import OLD, RALLY_FILE, ROOT


def juice(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "juice.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)


def _cases(suite: ET.Element) -> list[ET.Element]:
    return suite.findall("testcase")


def _props(el: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in el.findall("properties/property")}


def test_junit_has_a_suite_per_run_and_a_case_per_criterion(tmp_path: Path) -> None:
    crit = tmp_path / "sla.yaml"
    crit.write_text("sla: {failure_rate: {max: 100}, max_avg_duration: 0.000001,\n"
                    "      percentiles: {iteration: {p95: 1000}}}\n")
    out = tmp_path / "ci" / "sla.xml"
    cp = juice("sla", str(OLD), "--criteria", str(crit), "--junit", str(out))
    assert cp.returncode == 1, cp.stderr  # max_avg_duration fails everywhere
    assert out.is_file() and not list(out.parent.glob(".*.tmp"))
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"

    given = load_criteria(crit)
    want = {u.name: judge(u, given) for u in units([OLD])}
    suites = root.findall("testsuite")
    assert sorted(s.get("name", "") for s in suites) == sorted(want)
    total = fails = 0
    for s in suites:
        v = want[s.get("name", "")]
        cases = _cases(s)
        assert [c.get("name") for c in cases] == [r["criterion"] for r in v.results]
        assert int(s.get("tests", "-1")) == len(cases) == len(v.results)
        failed = [c for c in cases if c.find("failure") is not None]
        assert int(s.get("failures", "-1")) == len(failed) == sum(not r["success"] for r in v.results)
        for c, r in zip(cases, v.results, strict=True):
            f = c.find("failure")
            assert (f is None) == bool(r["success"])
            if f is not None:
                assert f.get("message") and f.get("message", "") in r["detail"]
            props = _props(c)
            assert float(props["value"]) == r["value"]
            assert "limit" in props
        assert _props(s)["workload"] == "keystone"
        assert any(k.startswith("param.") for k in _props(s))
        total += len(cases)
        fails += len(failed)
    assert int(root.get("tests", "-1")) == total and int(root.get("failures", "-1")) == fails
    assert fails == len(want)  # one failed criterion per run
    assert f"JUnit XML: {out}" in cp.stdout


def test_junit_of_a_rally_file_against_its_own_sla(tmp_path: Path) -> None:
    out = tmp_path / "rally.xml"
    cp = juice("sla", str(RALLY_FILE), "--junit", str(out))
    assert cp.returncode == 0, cp.stderr
    root = ET.parse(out).getroot()
    suites = root.findall("testsuite")
    assert len(suites) == len(units([RALLY_FILE]))
    cases = [c for s in suites for c in _cases(s)]
    assert [c.get("name") for c in cases] == ["failure_rate"]
    assert root.get("failures") == "0" and cases[0].find("failure") is None
    assert "rally_verdict" not in _props(cases[0])  # Rally's stored verdict agrees


def test_runs_without_criteria_are_skipped_cases_and_text_is_escaped() -> None:
    u = units([OLD])[0]
    u.name = 'a "quoted" <run> & more'
    root = ET.fromstring(to_text([Judged(u, None)]))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == u.name
    assert root.get("skipped") == "1" and root.get("tests") == "1"
    case = suite.find("testcase")
    assert case is not None and case.find("skipped") is not None
