"""Juice's code that runs in the messaging venv ($JUICE_CACHE/messaging), never in Juice's own.

- ``agent``: many oslo.messaging RPC servers / clients per process, open-loop paced, every message
  with an id and timestamps (send, server receive, reply receive), written as JSON lines.
- ``nats_driver`` (+ ``natsproto``): Juice's own oslo.messaging transport over NATS
  (``nats://`` URLs, entry point ``oslo.messaging.drivers``). oslo.messaging has no NATS driver;
  this one is Juice's, not upstream's.

It imports only the standard library and what the messaging lock holds (oslo.messaging,
oslo.config), so it must not import ``juice``.
"""

__version__ = "0.1.0"
