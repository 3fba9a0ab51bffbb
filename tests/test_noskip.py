"""tests/noskip.py: under JUICE_REQUIRE_ALL=1 a skip fails with its reason; "[optional]" skips
stay skips; without the variable nothing changes. Run in a child pytest (pytester)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = str(Path(__file__).resolve().parents[1])  # so the child pytest imports tests.noskip

CASES = '''
import pytest

def test_needs_a_server():
    pytest.skip("juice-wan-delay missing: run scripts/setup.sh")

@pytest.mark.skipif(True, reason="[optional] cockroach binary not on PATH")
def test_cockroach():
    pass

def test_plain():
    assert 1 + 1 == 2
'''


def test_a_skip_fails_under_require_all(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_cases=CASES)
    monkeypatch.setenv("JUICE_REQUIRE_ALL", "1")
    monkeypatch.setenv("PYTHONPATH", ROOT)
    res = pytester.runpytest_subprocess("-p", "tests.noskip", "-p", "no:cacheprovider", "-rs")
    res.assert_outcomes(passed=1, failed=1, skipped=1)
    res.stdout.fnmatch_lines(["*SKIPPED, which the full suite does not allow*juice-wan-delay missing*"])


def test_without_require_all_a_skip_is_a_skip(pytester: pytest.Pytester,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_cases=CASES)
    monkeypatch.delenv("JUICE_REQUIRE_ALL", raising=False)
    monkeypatch.setenv("PYTHONPATH", ROOT)
    res = pytester.runpytest_subprocess("-p", "tests.noskip", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, skipped=2)
