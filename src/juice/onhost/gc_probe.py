"""Each full garbage collection of a Keystone worker, logged (``juice.services.openstack.
keystone_warm`` reads the lines back). Written at the place beside the WSGI module as
``juice_gc_probe.py`` (``keystone_wsgi`` calls ``install()`` once Keystone is imported); standard
library only.

On stderr (the site's Keystone log): once ``juice-gc pid=P start objects=N``, then per full
collection ``juice-gc pid=P gen=2 collected=N ms=T``. It changes nothing the collector does;
its cost is one Python call per collection.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO


def install(out: TextIO | None = None) -> Callable[[str, dict[str, Any]], None]:
    """The hook, added to ``gc.callbacks``; lines go to ``out`` (default: the stderr of the
    moment)."""
    t0 = [0.0]

    def juice_gc(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            t0[0] = time.perf_counter()
        else:
            print(f"juice-gc pid={os.getpid()} gen=2 collected={info['collected']} "
                  f"ms={1000 * (time.perf_counter() - t0[0]):.1f}", file=out or sys.stderr, flush=True)

    gc.callbacks.append(juice_gc)
    print(f"juice-gc pid={os.getpid()} start objects={len(gc.get_objects())}", file=out or sys.stderr,
          flush=True)
    return juice_gc
