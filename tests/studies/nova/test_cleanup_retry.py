"""The driver's cleanup after a heavy run: a busy API's (or its load balancer's) 502/503/504 is
asked again until the deadline, any other error is not (``scenarios.when_answered``)."""

from __future__ import annotations

import asyncio
import time

import pytest

from juice.studies.nova.scenarios import NovaError, when_answered


def _flaky(answers: list[BaseException | str]) -> tuple[list[int], object]:
    calls: list[int] = []

    async def fn() -> str:
        calls.append(1)
        a = answers[min(len(calls), len(answers)) - 1]
        if isinstance(a, BaseException):
            raise a
        return a

    return calls, fn


def test_gateway_answers_are_asked_again_until_the_api_answers() -> None:
    calls, fn = _flaky([NovaError("DELETE /servers/x -> 504", status=504),
                        NovaError("GET /servers -> 503", status=503), TimeoutError(), "done"])
    got = asyncio.run(when_answered(fn, time.monotonic() + 60, first_wait_s=0.001))  # type: ignore[arg-type]
    assert got == "done" and len(calls) == 4


def test_other_errors_and_the_deadline_are_not_retried() -> None:
    calls, fn = _flaky([NovaError("DELETE /servers/x -> 403", status=403), "never"])
    with pytest.raises(NovaError, match="403"):
        asyncio.run(when_answered(fn, time.monotonic() + 60, first_wait_s=0.001))  # type: ignore[arg-type]
    assert len(calls) == 1
    calls, fn = _flaky([NovaError("GET /servers -> 504", status=504)])
    with pytest.raises(NovaError, match="504"):  # a deadline already passed: one try, its error
        asyncio.run(when_answered(fn, time.monotonic() - 1, first_wait_s=0.001))  # type: ignore[arg-type]
    assert len(calls) == 1
