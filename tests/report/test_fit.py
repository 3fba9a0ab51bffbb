"""Reports fit a 1280 px window: the fixture reports rendered in headless Chromium (Debian's
``chromium``, installed by ``scripts/test-deps.sh``) have no horizontal overflow, and no table
or figure reaches past the window's right edge (not even inside a scroll box)."""

from __future__ import annotations

from pathlib import Path

import pytest

from juice.studies import report as render
from tests.report.browser import chromium, measure
from tests.report.synth import messaging_results, nova_results
from tests.report.test_shared import nova_runs

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results-0.1"
pytestmark = pytest.mark.skipif(chromium() is None, reason="chromium is not installed: run "
                                "scripts/test-deps.sh (scripts/test.sh does) for the width test")


@pytest.mark.parametrize("name", ["quickstart", "scheduler-db", "nova", "messaging", "nova-faults", "all"])
def test_the_report_fits_1280_px(tmp_path: Path, name: str) -> None:
    nova = lambda: nova_results(tmp_path / "nova")  # noqa: E731
    msg = lambda: messaging_results(tmp_path / "msg")  # noqa: E731
    paths = {"quickstart": lambda: [FIXTURES / "quickstart"],
             "scheduler-db": lambda: [FIXTURES / "sdb-fixture"],
             "nova": lambda: [nova()], "messaging": lambda: [msg()],
             # the frame's shared sections: SLA, run order, faults (timeline), errors, settings
             "nova-faults": lambda: [nova_runs(tmp_path / "nf")[0].parent],
             "all": lambda: [FIXTURES / "quickstart", FIXTURES / "sdb-fixture", nova(), msg()]}[name]()
    out = render(paths, tmp_path / f"{name}.html")
    m = measure(out, 1280)
    assert m.client_width == 1280
    assert m.scroll_width <= m.client_width, m
    assert m.widest_right <= m.client_width, m
