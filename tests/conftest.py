"""Shared fixtures: root/namespace availability and unique lab names."""

from __future__ import annotations

import os
import secrets
import shutil

import pytest


def lab_capable() -> str | None:
    """None when this machine can build labs, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if shutil.which("ip") is None or shutil.which("iptables-restore") is None:
        return "iproute2/iptables missing: run scripts/setup.sh"
    return None


@pytest.fixture
def lab_name() -> str:
    """A short unique lab name (tests never touch the user's `lab`)."""
    return "t" + secrets.token_hex(3)
