"""Run client code inside a site's network namespace, from this (root) process.

A socket belongs to the network namespace of the thread that created it, and keeps it for
life. ``in_site(ns, fn)`` runs ``fn`` in a fresh thread that first joins ``ns`` (setns), so
connections opened by ``fn`` reach the lab addresses and cross the emulated WAN; the
returned connections can then be used from any thread. Needs root (CAP_SYS_ADMIN).

    conn = in_site(lab.site_ns(3), lambda: mariadb.connect(ep))
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from juice.errors import LabError

CLONE_NEWNET = 0x40000000
T = TypeVar("T")
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(ns: str) -> None:
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise LabError(f"setns({ns}) failed: {os.strerror(err)} (needs root)")
    finally:
        os.close(fd)


def in_site(ns: str, fn: Callable[[], T], timeout: float = 120.0) -> T:
    """Call ``fn`` in a thread inside network namespace ``ns``; return its result."""
    box: dict[str, object] = {}

    def body() -> None:
        try:
            _setns(ns)
            box["ok"] = fn()
        except BaseException as e:  # handed back to the caller
            box["err"] = e

    t = threading.Thread(target=body, name=f"in-{ns}", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise LabError(f"client call in {ns} did not finish within {timeout:.0f} s")
    if "err" in box:
        raise box["err"]  # type: ignore[misc]
    return box["ok"]  # type: ignore[return-value]
