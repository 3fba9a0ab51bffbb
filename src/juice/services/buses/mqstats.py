"""RabbitMQ's own message rates and queue depths over a run (issue 28: root causes from the
servers; seed 004 §3.5 plots RabbitMQ's deliver and receive rates along a boot storm).

Every node runs the ``rabbitmq_prometheus`` plugin (shipped with RabbitMQ 3.10; its listener on
the site address only, recorded among the deviations); a ``Sampler`` reads each node's
``/metrics`` every ``every_s`` seconds from the node's own place, in a thread, during the run's
window. Per sample, summed over the nodes: the global counters (messages received from
publishers, delivered to consumers, redelivered, acknowledged) turned into rates per second
against the previous sample, and the gauges (messages ready, unacknowledged, queues,
connections). A node that does not answer a sample is left out of that sample (a fault).

    with Sampler([(place, url), ...]) as s:
        ... the run ...
    s.frame()     # t (s from the first sample), received_per_s, delivered_per_s, ... ready, unacked
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pandas as pd

from juice.lab.place import Place

COUNTERS = {"rabbitmq_global_messages_received_total": "received",
            "rabbitmq_global_messages_delivered_total": "delivered",
            "rabbitmq_global_messages_redelivered_total": "redelivered",
            "rabbitmq_global_messages_acknowledged_total": "acknowledged"}
GAUGES = {"rabbitmq_queue_messages_ready": "ready", "rabbitmq_queue_messages_unacked": "unacked",
          "rabbitmq_queues": "queues", "rabbitmq_connections": "connections"}
LINE = re.compile(r"^([a-z_]+)(\{[^}]*\})? ([-+0-9.eE]+|NaN)$")
COLUMNS = ["t", *[f"{v}_per_s" for v in COUNTERS.values()], *GAUGES.values(), "nodes"]


def parse(text: str) -> dict[str, float]:
    """The counters and gauges of one /metrics answer, summed over their labels."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or m.group(3) == "NaN":
            continue
        name = COUNTERS.get(m.group(1)) or GAUGES.get(m.group(1))
        if name:
            out[name] = out.get(name, 0.0) + float(m.group(3))
    return out


def rates(samples: Sequence[tuple[float, dict[str, float], int]]) -> pd.DataFrame:
    """Samples (monotonic time, summed values, nodes answering) → the per-second frame."""
    rows = []
    t0 = samples[0][0] if samples else 0.0
    for (ta, a, na), (tb, b, nb) in pairwise(samples):
        dt = tb - ta
        if dt <= 0:
            continue
        row: dict[str, Any] = {"t": round(tb - t0, 3), "nodes": nb}
        for name in COUNTERS.values():
            # a node missing from one of the two samples would fake a rate: leave it out
            row[f"{name}_per_s"] = (max(0.0, b.get(name, 0.0) - a.get(name, 0.0)) / dt
                                    if na == nb and name in a and name in b else None)
        for name in GAUGES.values():
            row[name] = b.get(name)
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


class Sampler:
    """Samples the nodes' /metrics in a thread between ``__enter__`` and ``__exit__``."""

    def __init__(self, nodes: Sequence[tuple[Place, str]], every_s: float = 2.0) -> None:
        self.nodes, self.every_s = list(nodes), every_s
        self.samples: list[tuple[float, dict[str, float], int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        total: dict[str, float] = {}
        answered = 0
        for place, url in self.nodes:
            try:
                code, _, body = place.request("GET", url, timeout=5.0)
            except OSError:
                continue
            if code != 200:
                continue
            answered += 1
            for k, v in parse(body.decode(errors="replace")).items():
                total[k] = total.get(k, 0.0) + v
        self.samples.append((time.monotonic(), total, answered))

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.sample()
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - t0)))

    def __enter__(self) -> Sampler:
        if self.nodes:
            self._thread = threading.Thread(target=self._loop, name="juice-mqstats", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15.0)
            self.sample()  # the window's last point

    def frame(self) -> pd.DataFrame:
        return rates(self.samples)
