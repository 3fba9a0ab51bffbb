"""Juice's NATS transport for oslo.messaging — Juice's driver, NOT part of upstream
oslo.messaging (which has no NATS driver; a 2019 spec was never merged).

Loaded through the ``oslo.messaging.drivers`` entry point ``nats`` of this package:
``oslo_messaging.get_rpc_transport(conf, url="nats://10.210.1.2:4222,10.210.2.2:4222/")``.
All traffic goes over ONE NATS connection per driver (``natsproto.Client``: stdlib only,
reconnecting over the URL's servers in turn).

Subjects (``<exchange>`` is ``target.exchange`` or the transport's default, ``control_exchange``):

- ``<exchange>.<topic>``: subscribed by every RPC server of the topic in ONE queue group (named
  like the subject), so NATS gives each call/cast to one server: inside one cluster a random
  member; across gateways (a super-cluster) the publisher's own cluster is strictly preferred.
  That locality is what the messaging study measures.
- ``<exchange>.<topic>.<server>``: server-directed calls/casts (``target.server``); also a queue
  group, so that servers sharing one name share the traffic as a shared rabbit queue would.
- ``<exchange>.<topic>.fanout``: fanout casts, no queue group: every server gets a copy (a
  server may therefore not be called ``fanout``).
- Notifications: ``<exchange>.<topic>.<priority>`` (e.g. ``openstack.notifications.info``), a
  queue group per ``pool`` (default ``juice-notifications``): one copy per pool.
- Replies: one inbox per driver, ``_INBOX.<uuid>.*`` subscribed once; a call publishes with the
  reply subject ``_INBOX.<uuid>.<msg_id>`` and waits on a per-call waiter keyed by msg_id.

Payload: JSON (oslo_serialization.jsonutils). Request ``{"v": 1, "ctxt": {...}, "msg": {...},
"msg_id": ..., "timeout": call_monitor_timeout}``; reply ``{"msg_id", "result", "failure",
"ending"}``: ``failure`` is ``common.serialize_remote_exception`` (as the rabbit driver sends
it), turned back into the same exception by ``deserialize_remote_exception`` (a builtin
exception as ``<Name>_Remote``, an unknown one as ``oslo_messaging.RemoteError``). A reply with
``ending`` false and no result is a heartbeat (call_monitor_timeout).

Semantics and limits (NATS core, no JetStream): at-most-once. No durable queues: a call or cast
with no subscriber is dropped (a call then ends in MessagingTimeout), notifications are not
stored for absent listeners, a message in flight on a broken connection is lost. No acks, no
requeue (``require_features(requeue=True)`` raises NotImplementedError). ``retry`` is not
counted: a send waits for a reconnect within the client's budget (``reconnect_time_s``).

Options (URL query, e.g. ``nats://h:4222/?reconnect_time_s=10&name=compute-1``): ``name``,
``reconnect_time_s`` (30), ``connect_timeout`` (5), ``ping_interval`` (10), ``max_attempts`` (120).
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
import uuid
from typing import Any

import oslo_messaging
from oslo_messaging._drivers import base
from oslo_messaging._drivers import common as rpc_common
from oslo_serialization import jsonutils

from juice_messaging.natsproto import Client, ConnectionLost, Msg, NatsError, Subscription

LOG = logging.getLogger(__name__)
FANOUT = "fanout"
NOTIFY_GROUP = "juice-notifications"
_OPTS: dict[str, type] = {"name": str, "reconnect_time_s": float, "connect_timeout": float,
                          "ping_interval": float, "max_attempts": int}
_STOP = object()


def _token(s: str) -> str:
    if not s or any(c in s for c in " \t\r\n*>"):
        raise oslo_messaging.InvalidTarget(f"not usable in a NATS subject: {s!r}", s)
    return s


def subject(*parts: str) -> str:
    """Dot-joined subject (topics may hold dots; no wildcards, no blanks)."""
    return ".".join(_token(p) for p in parts)


class NatsIncomingMessage(base.RpcIncomingMessage):  # type: ignore[misc]
    """One request; ``reply`` publishes to the caller's inbox (at most once, never raises)."""

    def __init__(self, driver: NatsDriver, ctxt: dict[str, Any], message: dict[str, Any],
                 msg_id: str | None, reply_to: str | None, client_timeout: float | None) -> None:
        super().__init__(ctxt, message, msg_id)
        self._driver = driver
        self._reply_to = reply_to
        self._has_msg_id = msg_id is not None
        self.client_timeout = client_timeout

    def _send_reply(self, result: Any, failure: str | None, ending: bool) -> None:
        if not self._reply_to or not self._has_msg_id:
            return
        body = {"msg_id": self.msg_id, "result": result, "failure": failure, "ending": ending}
        self._driver._publish(self._reply_to, body)

    def reply(self, reply: Any = None, failure: Any = None) -> None:
        try:
            data = rpc_common.serialize_remote_exception(failure) if failure else None
            self._send_reply(reply, data, True)
        except Exception:
            LOG.exception("nats: reply to %s (msg %s) failed", self._reply_to, self.msg_id)

    def heartbeat(self) -> None:
        try:
            self._send_reply(None, None, False)
        except Exception as e:
            raise oslo_messaging.MessageDeliveryFailure(f"nats: heartbeat failed: {e}") from e

    def acknowledge(self) -> None:
        """Nothing to acknowledge: NATS core has no acks."""

    def requeue(self) -> None:
        """Not supported (see ``NatsDriver.require_features``)."""


class NatsNotificationMessage(base.IncomingMessage):  # type: ignore[misc]
    def acknowledge(self) -> None:
        pass

    def requeue(self) -> None:
        pass


class NatsListener(base.PollStyleListener):  # type: ignore[misc]
    """Subscriptions feeding one queue; ``poll`` hands out one message per call (batched by
    ``batch_poll_helper``). ``stop`` unsubscribes (queue-group peers get the traffic), then
    ``poll`` drains what already arrived."""

    def __init__(self, driver: NatsDriver, subjects: list[tuple[str, str | None]], notify: bool) -> None:
        super().__init__(driver.prefetch_size)
        self._driver = driver
        self._notify = notify
        self._q: queue.Queue[Any] = queue.Queue()
        self._stopped = threading.Event()
        self._subs: list[Subscription] = []
        client = driver._client()
        try:
            for subj, group in subjects:
                self._subs.append(client.subscribe(subj, self._q.put, queue=group))
        except NatsError as e:
            self._unsubscribe()
            raise oslo_messaging.MessageDeliveryFailure(f"nats: subscribe failed: {e}") from e
        driver._flush()

    def _unsubscribe(self) -> None:
        subs, self._subs = self._subs, []
        client = self._driver._nats  # never (re)connect just to unsubscribe
        if client is not None:
            for s in subs:
                client.unsubscribe(s)

    def _incoming(self, m: Msg) -> base.IncomingMessage | None:
        try:
            data = jsonutils.loads(m.payload)
            ctxt, msg = data["ctxt"], data["msg"]
        except (ValueError, KeyError, TypeError) as e:
            LOG.warning("nats: dropping a malformed message on %s: %s", m.subject, e)
            return None
        if self._notify:
            return NatsNotificationMessage(ctxt, msg)
        return NatsIncomingMessage(self._driver, ctxt, msg, data.get("msg_id"), m.reply, data.get("timeout"))

    @base.batch_poll_helper  # type: ignore[misc]
    def poll(self, timeout: float | None = None) -> base.IncomingMessage | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._stopped.is_set():
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    return None
            else:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                try:
                    item = self._q.get(timeout=left)
                except queue.Empty:
                    return None
            if item is _STOP:
                continue
            incoming = self._incoming(item)
            if incoming is not None:
                return incoming

    def stop(self) -> None:
        self._stopped.set()
        self._unsubscribe()
        self._q.put(_STOP)

    def cleanup(self) -> None:
        self._unsubscribe()


class NatsDriver(base.BaseDriver):  # type: ignore[misc]
    """Juice's oslo.messaging driver for NATS (not upstream's: see the module doc)."""

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: list[str] | None = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        hosts = [(h.hostname or "127.0.0.1", int(h.port or 4222)) for h in (url.hosts or [])]
        self._servers = [f"nats://{h}:{p}" for h, p in hosts] or ["nats://127.0.0.1:4222"]
        query = dict(getattr(url, "query", None) or {})
        self._opts: dict[str, Any] = {k: _OPTS[k](v) for k, v in query.items() if k in _OPTS}
        self._opts.setdefault("name", f"juice-oslo-{socket.gethostname()}-{os.getpid()}")
        self._lock = threading.Lock()
        self._nats: Client | None = None
        self._inbox: str | None = None
        self._waiters: dict[str, queue.Queue[dict[str, Any]]] = {}
        self.counters = {"calls": 0, "casts": 0, "timeouts": 0, "remote_errors": 0, "late_replies": 0}

    # ---- connection -----------------------------------------------------------------------
    def _client(self) -> Client:
        with self._lock:
            try:
                if self._nats is None or self._nats.state == "closed":
                    c = Client(self._servers, **self._opts)
                    c.connect()
                    self._nats, self._inbox = c, None
                elif self._nats.state == "dead":
                    self._nats.revive()  # a new bounded round; keeps the subscriptions
            except NatsError as e:
                raise oslo_messaging.MessageDeliveryFailure(f"nats: {e}") from e
            return self._nats

    def _publish(self, subj: str, body: dict[str, Any], reply: str | None = None) -> None:
        data = jsonutils.dump_as_bytes(body)
        try:
            self._client().publish(subj, data, reply=reply)
        except NatsError as e:
            raise oslo_messaging.MessageDeliveryFailure(f"nats: publish to {subj} failed: {e}") from e

    def _flush(self) -> None:
        try:
            self._client().flush(timeout=10)
        except ConnectionLost as e:
            raise oslo_messaging.MessageDeliveryFailure(f"nats: {e}") from e

    def _reply_inbox(self) -> str:
        client = self._client()
        with self._lock:
            if self._inbox is not None:
                return self._inbox
            inbox = f"_INBOX.{uuid.uuid4().hex}"
            try:
                client.subscribe(inbox + ".*", self._on_reply)
            except NatsError as e:
                raise oslo_messaging.MessageDeliveryFailure(f"nats: inbox subscribe failed: {e}") from e
            self._inbox = inbox
            return inbox

    def _on_reply(self, m: Msg) -> None:  # in the reader thread: no blocking
        msg_id = m.subject.rsplit(".", 1)[-1]
        waiter = self._waiters.get(msg_id)
        if waiter is None:
            self.counters["late_replies"] += 1  # its call already timed out
            return
        try:
            waiter.put(jsonutils.loads(m.payload))
        except ValueError:
            LOG.warning("nats: malformed reply to %s", msg_id)

    def stats(self) -> dict[str, Any]:
        """The driver's and the NATS client's counters (for the study)."""
        nats = self._nats.stats() if self._nats is not None else {}
        return {**self.counters, "nats": nats}

    # ---- the driver interface -----------------------------------------------------------------
    def require_features(self, requeue: bool = False) -> None:
        if requeue:
            raise NotImplementedError("Juice's NATS driver: no requeue (NATS core has no acks)")

    def _exchange(self, target: Any) -> str:
        return str(target.exchange or self._default_exchange or "openstack")

    def send(self, target: Any, ctxt: dict[str, Any], message: dict[str, Any],
             wait_for_reply: bool | None = None, timeout: float | None = None,
             call_monitor_timeout: float | None = None, retry: int | None = None,
             transport_options: Any = None) -> Any:
        ex = self._exchange(target)
        if target.fanout:
            subj = subject(ex, target.topic, FANOUT)
        elif target.server:
            subj = subject(ex, target.topic, target.server)
        else:
            subj = subject(ex, target.topic)
        body: dict[str, Any] = {"v": 1, "ctxt": ctxt, "msg": message, "msg_id": None, "timeout": None}
        if not wait_for_reply:
            self.counters["casts"] += 1
            self._publish(subj, body)
            return None
        self.counters["calls"] += 1
        msg_id = uuid.uuid4().hex
        body["msg_id"], body["timeout"] = msg_id, call_monitor_timeout
        waiter: queue.Queue[dict[str, Any]] = queue.Queue()
        self._waiters[msg_id] = waiter
        try:
            self._publish(subj, body, reply=f"{self._reply_inbox()}.{msg_id}")
            return self._wait(waiter, msg_id, subj, timeout, call_monitor_timeout)
        finally:
            self._waiters.pop(msg_id, None)

    def _wait(self, waiter: queue.Queue[dict[str, Any]], msg_id: str, subj: str,
              timeout: float | None, cm_timeout: float | None) -> Any:
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        cm_deadline = None if not cm_timeout else now + cm_timeout
        while True:
            limits = [d for d in (deadline, cm_deadline) if d is not None]
            left = None if not limits else min(limits) - time.monotonic()
            try:
                if left is not None and left <= 0:
                    raise queue.Empty
                data = waiter.get(timeout=left)
            except queue.Empty:
                self.counters["timeouts"] += 1
                raise oslo_messaging.MessagingTimeout(
                    f"Timed out waiting for a reply to message ID {msg_id} on {subj}") from None
            if data.get("failure"):
                self.counters["remote_errors"] += 1
                exc = rpc_common.deserialize_remote_exception(data["failure"], self._allowed_remote_exmods)
                raise exc
            if data.get("ending", True):
                return data.get("result")
            if cm_timeout:  # a heartbeat: the server is still working on it
                cm_deadline = time.monotonic() + cm_timeout

    def send_notification(self, target: Any, ctxt: dict[str, Any], message: dict[str, Any],
                          version: float, retry: int | None = None) -> None:
        # ``version`` selects rabbit's wire envelope; this driver's JSON needs none.
        self._publish(subject(self._exchange(target), target.topic),
                      {"v": 1, "ctxt": ctxt, "msg": message, "msg_id": None})

    def listen(self, target: Any, batch_size: int, batch_timeout: float | None) -> Any:
        ex = self._exchange(target)
        if target.server == FANOUT:
            raise oslo_messaging.InvalidTarget(f"a server may not be named {FANOUT!r} (NATS driver)", target)
        subj = subject(ex, target.topic)
        subs: list[tuple[str, str | None]] = [(subj, subj)]
        if target.server:
            direct = subject(ex, target.topic, target.server)
            subs.append((direct, direct))
        subs.append((subject(ex, target.topic, FANOUT), None))
        listener = NatsListener(self, subs, notify=False)
        return base.PollStyleListenerAdapter(listener, batch_size, batch_timeout)

    def listen_for_notifications(self, targets_and_priorities: list[tuple[Any, str]], pool: str | None,
                                 batch_size: int, batch_timeout: float | None) -> Any:
        group = _token(pool) if pool else NOTIFY_GROUP
        subs: list[tuple[str, str | None]] = [
            (subject(self._exchange(t), f"{t.topic}.{prio}"), group) for t, prio in targets_and_priorities]
        return base.PollStyleListenerAdapter(NatsListener(self, subs, notify=True), batch_size, batch_timeout)

    def cleanup(self) -> None:
        with self._lock:
            nats, self._nats, self._inbox = self._nats, None, None
        if nats is not None:
            nats.close()
