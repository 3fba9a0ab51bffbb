"""RabbitMQ federation: one independent broker per site, meshed by the federation plugin, so
that oslo.messaging 18.3.1 works UNCHANGED with every agent on its own site's broker.

    fed = RabbitFederation(lab, progress, sites=[1, 2, 3], topics=["compute"])  # pure
    fed.up()                       # 3 brokers + upstreams + policies + pre-declared topics
    fed.url(2)                     # "rabbit://juice:juice@10.210.2.2:5672/" (site 2's broker)
    fed.declare(["conductor"])     # more shared topics, later (before their first message)
    fed.counters()                 # RabbitMQ's counters + federation links (running / total)
    fed.stop()

The brokers are ``juice.services.buses.rabbitmq.RabbitMQ`` nodes with ``cluster=False`` and the
``rabbitmq_federation`` plugin (shipped by Debian's rabbitmq-server 3.10.8). On every broker
(all measured, tests/services/test_rabbitmq_federation.py):

- every other broker is a ``federation-upstream`` (``render_upstreams``: uri
  ``amqp://juice:juice@<site ip>:<port>``, prefetch-count 1000, ack-mode on-confirm,
  max-hops 1, reconnect-delay 1 s): a full mesh, each broker downstream of all the others;
- policy ``juice-fed-queues`` (queues, ``QUEUE_PATTERN``: every queue but ``amq.*``, the
  plugin's own ``federation: ...`` queues and oslo's per-server ``*_fanout_*`` queues):
  queue federation with every upstream. A federated queue pulls messages from the same-named
  queue of the other brokers only while it has consumers with spare capacity and nothing
  local to give them, and the plugin's upstream consumer has a lower priority than local
  consumers: **local consumers first**. oslo's RPC servers prefetch without limit
  (rabbit_qos_prefetch_count = 0) and ack on receipt, so a local server always "has
  capacity": with a server in the producer's site every call and cast stays local;
- policy ``juice-fed-exchanges`` (exchanges, ``EXCHANGE_PATTERN``: oslo's ``<topic>_fanout``
  exchanges and ``juice.remote``): exchange federation, max-hops 1. A fanout published in
  site 1 is forwarded once to every broker whose ``<topic>_fanout`` has bindings, so each
  server's own queue gets it exactly once;
- policy ``juice-fed-ae`` (exchange, the control exchange): ``alternate-exchange:
  juice.remote``, a fanout exchange bound (exchange-to-exchange) into the control exchange.
  A message the local control exchange cannot route (a call/cast to ``<topic>.<server>`` of a
  server in another site) goes to ``juice.remote``, is federated to every other broker and
  routed there into the control exchange again: the broker holding that server's queue
  delivers it, the others drop it (max-hops 1: never forwarded further). Directed calls and
  casts thus need no pre-declaration;
- pre-declared shared topics (``declare``; ``juice.onhost.amqp_declare``, run with the messaging venv's
  py-amqp): the control exchange (topic, durable False, auto_delete False) and, per topic,
  queue ``<topic>`` (durable False, auto_delete False, no arguments: EXACTLY what oslo
  declares with its defaults, so its own declarations do not fail) bound with routing key
  ``<topic>``. Without it a message to a topic with no server in the producer's site is
  unroutable there: it would be dropped, or (through ``juice.remote``) copied to EVERY site
  with a server — a cast processed once per site. So every shared topic that may be used
  from a site without its servers must be pre-declared.

Replies: a server publishes the reply to queue ``reply_<uuid>`` through the default exchange
of ITS broker, mandatory. The caller's ``reply_`` queue is federated (``juice-fed-queues``),
and a queue federation link DECLARES its upstream queue (same name, same arguments:
``x-expires``), so ``reply_<uuid>`` soon exists at every broker and the caller's queue pulls
the reply over. Until the links are up (the first call of a new client, ~0.3 s measured) the
publish comes back unroutable: oslo's ``MessageUndeliverable`` loop retries every 0.25 s,
and the first remote call pays it once.

Measured (3 sites, 5 ms one-way, one broker each, oslo servers in every site, the client in
site 1; load ~1.5 on 2 cores): 100 % of calls and casts served in site 1, call median 1.2-1.9
ms; with no server in site 1 every call is served (by sites 2 and 3 evenly), median 12.6 ms
(one RTT more), the client's first remote call ~280 ms (the reply retry above); each cast
processed exactly once, each fanout once per server; a broker killed and restarted is back in
~7 s with all links running. Bring-up: brokers ~10 s in parallel, mesh + declarations ~3 s.

What does not hold: "a local server WITH CAPACITY first" is in practice "a local server
first". With oslo's default rabbit_qos_prefetch_count = 0 the local consumer is never blocked,
so a slow local server is never relieved (measured: 60/60 calls local, 600 ms each, behind a
1-thread server taking 100 ms per call with 6 concurrent callers). With
rabbit_qos_prefetch_count = 1 (the links consume at priority -1) only 4-8 of 60 calls moved to
idle remote servers (6-12 callers; local median 0.6-1.2 s vs 0.14-0.34 s remote; link
prefetch-count 1000 or 10 alike): queue federation does not balance a saturated site.
``queues="quorum"`` pre-declares quorum queues (clients need ``rabbit_quorum_queue = true``);
``mirrored`` is refused (no cluster). The control exchange is one name (oslo's default
``openstack``; nova's services use ``nova``): one deployment per control exchange.

Costs: every federated queue has a link per upstream (N-1), and the links declare the queue at
every other broker, which federates it in turn: N(N-1) links per oslo queue (reply queues
included), each holding an AMQP connection to its upstream; and every broker receives every message that is
unroutable at another one (``juice.remote``). ``counters`` reports the links.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from juice import onhost
from juice.errors import ServiceError
from juice.paths import cache_dir
from juice.services.base import Progress, Sites, quiet
from juice.services.buses.rabbitmq import (
    AMQP_PORT,
    DIST_PORT,
    EPMD_PORT,
    PASSWORD,
    USER,
    Node,
    RabbitMQ,
    oslo_options,
)

PLUGIN = "rabbitmq_federation"
CONTROL_EXCHANGE = "openstack"      # oslo.messaging's default control_exchange
REMOTE_EXCHANGE = "juice.remote"    # the control exchanges' alternate exchange
ACK_MODES = ("on-confirm", "on-publish", "no-ack")
QUEUE_PATTERN = r"^(?!amq\.|federation: )(?!.*_fanout)"
EXCHANGE_PATTERN = r"(_fanout|^juice\.remote)$"
MESSAGING_PY = cache_dir() / "messaging" / "bin" / "python"

# argv: HOST:PORT SPEC_JSON. Declares what render_declare lists; prints the queues declared.
DECLARE = onhost.source("amqp_declare")


def upstream_name(node: Node) -> str:
    return f"site{node.site}-{node.short}"


def render_upstreams(node: Node, nodes: Sequence[Node], *, prefetch: int = 1000,
                     ack_mode: str = "on-confirm", max_hops: int = 1) -> list[list[str]]:
    """``rabbitmqctl`` argument lists declaring every OTHER broker an upstream of ``node``."""
    if ack_mode not in ACK_MODES:
        raise ServiceError(f"ack_mode: expected one of {', '.join(ACK_MODES)}, got {ack_mode!r}")
    if prefetch < 1 or max_hops < 1:
        raise ServiceError(f"prefetch and max_hops must be >= 1 (got {prefetch}, {max_hops})")
    out = []
    for o in nodes:
        if o is node:
            continue
        definition = {"uri": f"amqp://{USER}:{PASSWORD}@{o.ip}:{o.amqp_port}",
                      "prefetch-count": prefetch, "ack-mode": ack_mode, "max-hops": max_hops,
                      "reconnect-delay": 1}
        out.append(["set_parameter", "-p", "/", "federation-upstream", upstream_name(o),
                    json.dumps(definition, separators=(",", ":"))])
    return out


def render_policies(control_exchange: str = CONTROL_EXCHANGE) -> list[list[str]]:
    """The three policies of every broker (see the module doc)."""
    all_up = json.dumps({"federation-upstream-set": "all"}, separators=(",", ":"))
    ae = json.dumps({"alternate-exchange": REMOTE_EXCHANGE}, separators=(",", ":"))
    pattern = "^" + "".join("\\" + c if not c.isalnum() else c for c in control_exchange) + "$"
    return [
        ["set_policy", "-p", "/", "--apply-to", "queues", "--priority", "1", "juice-fed-queues",
         QUEUE_PATTERN, all_up],
        ["set_policy", "-p", "/", "--apply-to", "exchanges", "--priority", "1",
         "juice-fed-exchanges", EXCHANGE_PATTERN, all_up],
        ["set_policy", "-p", "/", "--apply-to", "exchanges", "--priority", "2", "juice-fed-ae",
         pattern, ae],
    ]


def render_declare(topics: Sequence[str], queues: str = "classic",
                   control_exchange: str = CONTROL_EXCHANGE) -> dict[str, Any]:
    """What ``juice.onhost.amqp_declare`` gets: oslo.messaging 18.3.1's own declarations of a
    topic consumer with its defaults (amqp_durable_queues = False; ``quorum``:
    rabbit_quorum_queue = True, which makes the queue AND the control exchange durable and adds
    x-queue-type)."""
    oslo_options(queues)  # validates the flavour
    if queues == "mirrored":
        raise ServiceError("queues: mirrored needs a cluster; federated brokers are independent")
    for t in topics:
        if not t or len(t.encode()) > 255:
            raise ServiceError(f"topics: {t!r} is not a queue name")
    quorum = queues == "quorum"
    return {"user": USER, "password": PASSWORD, "exchange": control_exchange,
            "remote": REMOTE_EXCHANGE, "durable": quorum,
            "arguments": {"x-queue-type": "quorum"} if quorum else {}, "queues": list(topics)}


class RabbitFederation(RabbitMQ):
    """An independent RabbitMQ broker in each of ``sites``, federated (see the module doc)."""

    kind = "rabbitmq-federation"

    def __init__(self, lab: Sites, progress: Progress = quiet, *, sites: Sequence[int] | None = None,
                 topics: Sequence[str] = (), queues: str = "classic",
                 control_exchange: str = CONTROL_EXCHANGE, prefetch: int = 1000,
                 ack_mode: str = "on-confirm", max_hops: int = 1, amqp_port: int = AMQP_PORT,
                 dist_port: int = DIST_PORT, epmd_port: int = EPMD_PORT) -> None:
        chosen = list(sites) if sites is not None else list(lab.sites)
        if len(set(chosen)) != len(chosen):
            raise ServiceError(f"sites: listed twice in {chosen} (one broker per site)")
        for s in chosen:
            if s not in lab.sites:
                raise ServiceError(f"sites: {s} is not a site of this lab (1..{len(lab.sites)})")
        super().__init__(lab, progress, nodes=chosen, cluster=False, queues="classic",
                         amqp_port=amqp_port, dist_port=dist_port, epmd_port=epmd_port,
                         plugins=[PLUGIN])
        self.queues = queues
        self.control_exchange = control_exchange
        self.topics = list(topics)
        self.prefetch, self.ack_mode, self.max_hops = prefetch, ack_mode, max_hops
        render_declare(self.topics, queues, control_exchange)             # validates
        render_upstreams(self.nodes[0], self.nodes, prefetch=prefetch, ack_mode=ack_mode,
                         max_hops=max_hops)

    @property
    def sites_with_broker(self) -> list[int]:
        return [n.site for n in self.nodes]

    def start(self) -> None:
        super().start()   # independent brokers (cluster=False), started in parallel
        t0 = time.monotonic()
        try:
            self._each(self._mesh)
            self.declare(self.topics)
            self.timings["federation_s"] = round(time.monotonic() - t0, 3)
            self.progress(f"rabbitmq-federation: {len(self.nodes)} broker(s) meshed in "
                          f"{self.timings['federation_s']:.1f} s")
        except BaseException:
            self.stop()
            raise

    def restart(self, site: int, timeout: float = 300.0) -> dict[str, object]:
        """Start the killed broker of ``site`` again: its upstreams and policies are in its
        mnesia, but its non-durable exchanges and queues are gone: declared again."""
        out = super().restart(site, timeout)
        self.declare(self.topics, nodes=self._nodes_in(site))
        return out

    def _each(self, fn: Callable[[Node], None], nodes: Sequence[Node] | None = None) -> None:
        """``fn(node)`` for every broker (of ``nodes``) at once (each is a few ``rabbitmqctl``
        calls of ~0.3 s); the first error is raised once all are done."""
        todo = list(nodes if nodes is not None else self.nodes)
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            for f in [pool.submit(fn, n) for n in todo]:
                f.result()

    def _mesh(self, n: Node) -> None:
        self.ctl(n, "set_cluster_name", f"juice-site{n.site}")  # names in x-received-from
        for argv in render_upstreams(n, self.nodes, prefetch=self.prefetch, ack_mode=self.ack_mode,
                                     max_hops=self.max_hops):
            self.ctl(n, *argv)
        for argv in render_policies(self.control_exchange):
            self.ctl(n, *argv)

    def declare(self, topics: Sequence[str], nodes: Sequence[Node] | None = None) -> None:
        """Declare, on every broker (of ``nodes``), the control exchange, ``juice.remote``
        bound into it and a queue per shared topic bound with its name, as oslo does
        (``render_declare``). Idempotent."""
        spec = json.dumps(render_declare(topics, self.queues, self.control_exchange))

        def one(n: Node) -> None:
            place = self.lab.place(n.site)
            if not place.run(["test", "-x", str(MESSAGING_PY)]).ok:
                raise ServiceError(f"{place.label}: {MESSAGING_PY} is missing: run scripts/setup.sh "
                                   "(messaging venv)")
            r = place.run([str(MESSAGING_PY), "-c", DECLARE, f"{n.ip}:{n.amqp_port}", spec], timeout=60)
            if not r.ok:
                why = (r.err or r.out).strip().splitlines()
                raise ServiceError(f"declare on {n.name}: exit {r.rc}: {' | '.join(why[-3:])}")

        self._each(one, nodes)
        self.topics += [t for t in topics if t not in self.topics]

    # ---- observations -------------------------------------------------------------------
    def federation_status(self, node: Node, timeout: float = 30.0) -> list[dict[str, Any]]:
        """``rabbitmqctl federation_status`` of ``node``: one row per link (type, queue or
        exchange, upstream, status running|starting|error|shutdown, error)."""
        out = self.ctl(node, "federation_status", "--formatter", "json", timeout=timeout)
        rows: list[dict[str, Any]] = json.loads(out or "[]")
        return rows

    def counters(self, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
        """RabbitMQ's counters per broker plus ``federation_links`` (this broker's links, it
        being downstream), ``federation_running``, and ``queue_links`` / ``exchange_links``."""
        out = super().counters(timeout)
        for n in self.nodes:
            if n.name not in out:
                continue
            rows = self.federation_status(n, timeout)
            c = out[n.name]
            c["federation_links"] = len(rows)
            c["federation_running"] = sum(1 for r in rows if r.get("status") == "running")
            c["queue_links"] = sum(1 for r in rows if r.get("type") == "queue")
            c["exchange_links"] = sum(1 for r in rows if r.get("type") == "exchange")
        return out

    def facts(self) -> dict[str, object]:
        return {**super().facts(), "plugins": list(self.plugins),
                "control_exchange": self.control_exchange, "topics": list(self.topics),
                "upstream": {"prefetch-count": self.prefetch, "ack-mode": self.ack_mode,
                             "max-hops": self.max_hops},
                "policies": {"queues": QUEUE_PATTERN, "exchanges": EXCHANGE_PATTERN,
                             "alternate-exchange": REMOTE_EXCHANGE}}
