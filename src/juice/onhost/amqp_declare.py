"""Exchanges and queues declared on one RabbitMQ broker as oslo.messaging does
(``juice.services.buses.rabbitmq_federation``: what ``render_declare`` lists), run AT the
broker's place with the messaging venv's Python (``amqp`` is there, not in Juice's venv).

    python -c "$(source amqp_declare)" HOST:PORT SPEC_JSON     # prints the queues declared

SPEC: ``{"user", "password", "exchange", "remote", "durable", "queues", "arguments"}``: the
topic exchange, the fanout ``remote`` exchange bound into it, and each queue bound to the
exchange with its own name. Idempotent.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def declare(ch: Any, spec: dict[str, Any]) -> list[str]:
    """What ``spec`` lists, on the AMQP channel ``ch``; the queues."""
    x = spec["exchange"]
    ch.exchange_declare(x, "topic", durable=spec["durable"], auto_delete=False)
    ch.exchange_declare(spec["remote"], "fanout", durable=False, auto_delete=False)
    ch.exchange_bind(destination=x, source=spec["remote"], routing_key="")
    for q in spec["queues"]:
        ch.queue_declare(q, durable=spec["durable"], auto_delete=False, arguments=spec["arguments"])
        ch.queue_bind(q, x, routing_key=q)
    queues: list[str] = spec["queues"]
    return queues


def main(argv: list[str]) -> None:
    import amqp

    host, spec = argv[0], json.loads(argv[1])
    c = amqp.Connection(host=host, userid=spec["user"], password=spec["password"], virtual_host="/",
                        connect_timeout=10)
    c.connect()
    queues = declare(c.channel(), spec)
    c.close()
    print(json.dumps(queues))


if __name__ == "__main__":
    main(sys.argv[1:])
