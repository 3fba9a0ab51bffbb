"""`juice calibrate`: A/A runs of one point of a spec (the toy study: pings across a 2-site lab),
each on a lab of its own by default, the host's run-to-run spread stored and then used by
`juice compare` where a side has one run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import Juice
from tests.studies.toy import Toy


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a lab needs root")
def test_calibrate_runs_aa_stores_the_spread_and_compare_uses_it(
        toy: Toy, tmp_path: Path, juice: Juice, monkeypatch: pytest.MonkeyPatch) -> None:
    cal_dir = tmp_path / "calibration"
    monkeypatch.setenv("JUICE_CALIBRATION_DIR", str(cal_dir))
    spec = tmp_path / "toy.yaml"
    spec.write_text(yaml.safe_dump({"workload": "toy", "name": "pings", "delay_ms": [0, 2], "count": 5,
                                    "runner": {"warmup_runs": 0}}))
    results = tmp_path / "aa"
    code, out, err = juice("calibrate", str(spec), "--runs", "3", "--point", "2", "--results", str(results))
    assert code == 0, out + err
    text = " ".join((out + err).split())  # progress lines wrap at the console's width
    # point 2 of the plan is the 2 ms one, three times, each in a lab of its own
    assert "3 A/A runs of delay (one-way)=2 ms, pings=5, each on a deployment of its own" in text
    assert len(re.findall(r"lab toy[0-9a-f]+: 2 sites at 2 ms one-way", text)) == 3
    runs = sorted(d for d in results.iterdir() if (d / "manifest.json").exists())
    assert [json.loads((d / "manifest.json").read_text())["params"]["repetition"] for d in runs] == [0, 1, 2]
    (stored,) = list(cal_dir.glob("*.json"))
    doc = json.loads(stored.read_text())
    entries = {(e["metric"], e["stat"]): e for e in doc["entries"]}
    it = entries[("iteration", "mean")]
    assert it["runs"] == 3 and it["fresh"] is True and it["config"]["delay_ms"] == "2.0"
    durations = [[json.loads(line)["duration"] for line in (d / "iterations.jsonl").read_text().splitlines()]
                 for d in runs]
    means = [sum(x) / len(x) for x in durations]
    mean = sum(means) / 3
    sd = (sum((m - mean) ** 2 for m in means) / 2) ** 0.5
    assert it["cv"] == pytest.approx(sd / mean) and it["mean"] == pytest.approx(mean)
    assert "│ iteration" in out and "n@X: runs a side to detect a change of X" in text
    # one run against one run: judged against the stored spread, and the method says so
    code, out, err = juice("compare", str(runs[0]), str(runs[1]), "--json")
    assert code == 0, err
    d = next(x for x in json.loads(out)["deltas"] if (x["metric"], x["stat"]) == ("iteration", "mean"))
    assert d["method"].startswith("calibration of ") and "3 runs, fresh deployments" in d["method"]
    assert d["verdict"] in ("real", "within noise")
    code, out, err = juice("compare", str(runs[0]), str(runs[1]), "--json", "--no-calibration")
    d = next(x for x in json.loads(out)["deltas"] if (x["metric"], x["stat"]) == ("iteration", "mean"))
    assert d["verdict"] == "one run a side: run-to-run variation unknown"


def test_calibrate_refuses_bad_input_in_one_line(tmp_path: Path, juice: Juice) -> None:
    code, _, err = juice("calibrate", str(tmp_path), "--runs", "1")
    assert code == 2 and "--runs: 1 is out of range" in err
    (tmp_path / "empty").mkdir()
    code, _, err = juice("calibrate", str(tmp_path / "empty"))
    assert code == 2 and "no complete Juice run" in err
