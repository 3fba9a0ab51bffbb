"""SLA verdicts as JUnit XML, the report every CI shows (``juice sla --junit FILE``), as Rally's
``junit-xml`` exporter does for a task: here one ``<testsuite>`` per run (a Juice run
directory, or a workload of a Rally file) and one ``<testcase>`` per criterion, a
``<failure message=...>`` for a criterion that failed. A run without criteria is one skipped
testcase (its runs were not gated).

    <testsuites name="juice sla" tests="4" failures="1" errors="0" skipped="0">
      <testsuite name="<run>" tests="2" failures="1" errors="0" skipped="0" timestamp="...">
        <properties><property name="workload" value="keystone"/> ... params ...</properties>
        <testcase classname="juice.sla.keystone.<run>" name="failure_rate" time="0">
          <properties><property name="value" value="0.0"/><property name="limit" .../>
                      <property name="interval" .../></properties>
        </testcase>
        <testcase ... name="max_avg_duration"><failure message="..." type="sla">detail</failure>
        </testcase>

Properties: ``value``, ``limit``, ``interval`` and ``interval_method`` when the judge gave them
(numbers as text, other values as JSON), and ``rally_verdict`` when a Rally file's stored
verdict on the criterion differs from Juice's.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from juice.results.samples import Unit
from juice.sla.judge import Verdict

FIELDS = ("value", "limit", "interval", "interval_method")


@dataclass(frozen=True)
class Judged:
    """One run and its verdict (None: the run had no criteria, it was skipped)."""

    unit: Unit
    verdict: Verdict | None


def _text(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return "nan" if isinstance(v, float) and math.isnan(v) else repr(v)
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


def _timestamp(when: object) -> str:
    """JUnit's ISO 8601 time (UTC, seconds) of an epoch number; a text stays as it is."""
    if isinstance(when, int | float) and not isinstance(when, bool) and math.isfinite(when):
        return datetime.fromtimestamp(when, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return str(when) if when else ""


def _properties(parent: ET.Element, items: Mapping[str, object]) -> None:
    if not items:
        return
    props = ET.SubElement(parent, "properties")
    for k, v in items.items():
        ET.SubElement(props, "property", name=k, value=_text(v))


def _rally_theirs(unit: Unit) -> dict[str, bool]:
    return {str(r.get("criterion")): bool(r.get("success")) for r in unit.rally_results or []
            if isinstance(r, Mapping)}


def document(judged: Sequence[Judged], name: str = "juice sla") -> ET.ElementTree:
    """The JUnit XML tree of ``judged``."""
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for j in judged:
        unit = j.unit
        suite = ET.SubElement(root, "testsuite", name=unit.name)
        meta: dict[str, object] = {"workload": unit.workload, "path": str(unit.path)}
        params = unit.meta.get("params")
        if isinstance(params, Mapping):
            meta.update({f"param.{k}": v for k, v in sorted(params.items())})
        when = _timestamp(unit.meta.get("started_at") or unit.meta.get("created_at"))
        if when:
            suite.set("timestamp", when)
        _properties(suite, meta)
        classname = f"juice.sla.{unit.workload}.{unit.name}"
        tests = failures = skipped = 0
        if j.verdict is None:
            case = ET.SubElement(suite, "testcase", classname=classname, name="sla", time="0")
            ET.SubElement(case, "skipped", message="no sla: criteria for this run (give --criteria FILE)")
            tests = skipped = 1
        else:
            theirs = _rally_theirs(unit)
            for r in j.verdict.results:
                crit = str(r["criterion"])
                case = ET.SubElement(suite, "testcase", classname=classname, name=crit, time="0")
                props: dict[str, object] = {k: v for k in FIELDS if (v := r.get(k)) is not None}
                if crit in theirs and theirs[crit] != bool(r["success"]):
                    props["rally_verdict"] = "Passed" if theirs[crit] else "Failed"
                _properties(case, props)
                tests += 1
                if not r["success"]:
                    failures += 1
                    detail = str(r.get("detail", ""))
                    fail = ET.SubElement(case, "failure", message=detail.splitlines()[0] if detail else crit,
                                         type="sla")
                    fail.text = detail
        for k, v in (("tests", tests), ("failures", failures), ("errors", 0), ("skipped", skipped)):
            suite.set(k, str(v))
        suite.set("time", "0")
        totals["tests"] += tests
        totals["failures"] += failures
        totals["skipped"] += skipped
    for k in ("tests", "failures", "skipped"):
        root.set(k, str(totals[k]))
    root.set("errors", "0")
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def to_text(judged: Sequence[Judged], name: str = "juice sla") -> str:
    """The JUnit XML document of ``judged``, with its XML declaration."""
    body = ET.tostring(document(judged, name).getroot(), encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
