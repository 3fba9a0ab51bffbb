"""Fixtures for the real-database tests: one small ephemeral lab per module (3 sites,
10 ms one-way) into which each test deploys, and always stops, its own servers."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from juice.lab import LocalLab, spec
from juice.paths import native_bin
from tests.conftest import lab_capable


def services_capable() -> str | None:
    reason = lab_capable()
    if reason:
        return reason
    if not native_bin("juice-wan-delay").exists():
        return f"{native_bin('juice-wan-delay')} missing: run native/build.sh (or scripts/setup.sh)"
    return None


needs_lab = [pytest.mark.slow, pytest.mark.root,
             pytest.mark.skipif(services_capable() is not None, reason=services_capable() or "")]


@pytest.fixture(scope="module")
def lab3() -> Iterator[LocalLab]:
    name = "d" + secrets.token_hex(3)
    with LocalLab.up(spec.parse({"name": name, "sites": 3, "delay_ms": 10}), ephemeral=True) as lab:
        yield lab


class FakeSites:
    """A stand-in lab with only what service constructors check (2 sites, their addresses):
    for option validation tests; no server is started."""

    sites = range(1, 3)

    def site_ip(self, site: int) -> str:
        return f"10.210.{site}.2"
