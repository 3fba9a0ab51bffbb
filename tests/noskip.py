"""Nothing passes silently: under ``JUICE_REQUIRE_ALL=1`` (scripts/test.sh sets it, so CI runs
with it) a skipped test is a failure that says why it skipped. A real-server test skips only
when the machine cannot run it (no root, no delayer, no sshd, a venv missing...): on the
machines the suite is for, that is a broken set-up, not a pass. The one exception is a skip
whose reason starts with ``[optional]``: what this project cannot obtain here (a CockroachDB
binary, which only a user can provide).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

OPTIONAL = "[optional]"


def _reason(rep: pytest.TestReport) -> str:
    lr: Any = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2]).removeprefix("Skipped: ")
    return str(lr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    rep: pytest.TestReport = outcome.get_result()
    if not rep.skipped or os.environ.get("JUICE_REQUIRE_ALL") != "1" or hasattr(rep, "wasxfail"):
        return
    reason = _reason(rep)
    if reason.startswith(OPTIONAL):
        return
    rep.outcome = "failed"
    rep.longrepr = (f"SKIPPED, which the full suite does not allow (JUICE_REQUIRE_ALL=1, set by "
                    f"scripts/test.sh): {reason}")
