"""A minimal, synchronous, thread-safe NATS client (the text protocol over a plain socket).

Juice's own code, standard library only (no nats-py): it serves ``nats_driver``, Juice's
oslo.messaging transport, and is unit-tested in Juice's venv without oslo.

    c = Client("nats://10.210.1.2:4222,10.210.2.2:4222/", name="juice-rpc")
    c.connect()                                   # INFO / CONNECT / PING-PONG, then a reader thread
    sub = c.subscribe("a.b", queue="a.b", cb=fn)   # fn(Msg) runs IN the reader thread: keep it short
    c.publish("a.b", b"payload", reply="_INBOX.x.1")
    c.flush(timeout=5)                             # PING, wait for its PONG (bounded)
    c.stats()                                      # reconnects, msgs/bytes in and out, errors
    c.close()

Protocol: CONNECT with verbose=false, pedantic=false, a client name, echo on (a process's own
subscriptions get its own messages). One reader thread parses INFO, MSG (and HMSG), PING
(answered with PONG), PONG (completes flushes, in order), +OK and -ERR (counted, kept as
``last_error``; the server closes the connection after a fatal one). Writes go under one lock.
Liveness: with no bytes for ``ping_interval`` s the client PINGs; ``max_pings_out`` unanswered
PINGs count as a dead connection.

Reconnect: the URL may list several servers. On a socket error (or EOF, or a dead connection)
the reader thread tries the servers in turn, starting with the one after the current, for at
most ``reconnect_time_s`` seconds and ``max_attempts`` connection attempts; once connected it
re-issues every SUB before publishers resume. Publishers block meanwhile (bounded by the same
budget). Messages in flight on a broken socket are lost (NATS core is at-most-once). When the
budget is spent the client is dead: calls raise ``ConnectionLost`` until ``revive()`` (one more
bounded round, subscriptions kept) succeeds.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PORT = 4222
MAX_CONTROL_LINE = 64 * 1024


class NatsError(Exception):
    """A protocol error or a refused operation."""


class ConnectionLost(NatsError):
    """No server reachable within the (re)connect budget, or the client is closed."""


@dataclass(frozen=True)
class Msg:
    subject: str
    sid: int
    reply: str | None
    payload: bytes
    headers: bytes = b""  # raw header block of an HMSG (never requested by this client)


@dataclass(frozen=True)
class Control:
    """A control operation read from the server: INFO (arg = JSON), PING, PONG, +OK, -ERR."""

    op: str
    arg: str = ""


def parse_servers(url: str | Sequence[str]) -> list[tuple[str, int]]:
    """``nats://h1:p1,h2:p2/`` (or a list of such URLs, or bare ``host[:port]``) → [(host, port)]."""
    items = [url] if isinstance(url, str) else list(url)
    out: list[tuple[str, int]] = []
    for item in items:
        rest = item.split("://", 1)[1] if "://" in item else item
        rest = rest.split("/", 1)[0]
        for hp in rest.split(","):
            hp = hp.strip().rsplit("@", 1)[-1]  # credentials are not supported: dropped
            if not hp:
                continue
            host, _, port = hp.rpartition(":") if ":" in hp else (hp, "", "")  # IPv4 or a name
            out.append((host, int(port) if port else DEFAULT_PORT))
    if not out:
        raise NatsError(f"no NATS server in {url!r}")
    return out


class Parser:
    """Incremental parser of what a NATS server sends (pure: bytes in, operations out).
    Handles split reads anywhere, including inside a payload or its trailing CRLF."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pending: tuple[str, int, str | None, int, int] | None = None  # MSG awaiting payload

    def feed(self, data: bytes) -> list[Msg | Control]:
        self._buf += data
        out: list[Msg | Control] = []
        while True:
            if self._pending is not None:
                subject, sid, reply, hlen, size = self._pending
                if len(self._buf) < size + 2:
                    return out
                if self._buf[size:size + 2] != b"\r\n":
                    raise NatsError("payload not followed by CRLF")
                body = bytes(self._buf[:size])
                del self._buf[:size + 2]
                self._pending = None
                out.append(Msg(subject, sid, reply, body[hlen:], body[:hlen]))
                continue
            end = self._buf.find(b"\r\n")
            if end < 0:
                if len(self._buf) > MAX_CONTROL_LINE:
                    raise NatsError("control line too long")
                return out
            line = bytes(self._buf[:end]).decode("utf-8", "replace")
            del self._buf[:end + 2]
            op, _, arg = line.partition(" ")
            op = op.upper()
            if op in ("MSG", "HMSG"):
                self._pending = self._msg_header(op, arg.split())
            elif op in ("PING", "PONG", "+OK"):
                out.append(Control(op))
            elif op in ("INFO", "-ERR"):
                out.append(Control(op, arg.strip()))
            elif line:
                raise NatsError(f"unknown protocol line {line[:80]!r}")

    @staticmethod
    def _msg_header(op: str, parts: list[str]) -> tuple[str, int, str | None, int, int]:
        nsizes = 2 if op == "HMSG" else 1
        if len(parts) not in (2 + nsizes, 3 + nsizes):
            raise NatsError(f"bad {op} line: {' '.join(parts)!r}")
        try:
            sizes = [int(x) for x in parts[-nsizes:]]
            sid = int(parts[1])
        except ValueError as e:
            raise NatsError(f"bad {op} line: {' '.join(parts)!r}") from e
        reply = parts[2] if len(parts) == 3 + nsizes else None
        hlen, size = (sizes[0], sizes[1]) if op == "HMSG" else (0, sizes[0])
        if size < 0 or not 0 <= hlen <= size:
            raise NatsError(f"bad {op} sizes: {' '.join(parts)!r}")
        return parts[0], sid, reply, hlen, size


@dataclass
class Subscription:
    sid: int
    subject: str
    queue: str | None
    cb: Callable[[Msg], None]
    received: int = 0


@dataclass
class _Pong:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


def _check_token(what: str, s: str) -> None:
    if not s or any(c in s for c in " \t\r\n"):
        raise NatsError(f"invalid {what}: {s!r}")


class Client:
    """See the module doc. Thread-safe: every method may be called from any thread."""

    def __init__(self, servers: str | Sequence[str], *, name: str = "juice", connect_timeout: float = 5.0,
                 reconnect_time_s: float = 30.0, max_attempts: int = 120, reconnect_wait: float = 0.1,
                 ping_interval: float = 10.0, max_pings_out: int = 2) -> None:
        self.servers = parse_servers(servers)
        self.name = name
        self.connect_timeout = connect_timeout
        self.reconnect_time_s = reconnect_time_s
        self.max_attempts = max_attempts
        self.reconnect_wait = reconnect_wait
        self.ping_interval = ping_interval
        self.max_pings_out = max_pings_out
        self.server_info: dict[str, Any] = {}
        self.current: tuple[str, int] | None = None
        self.last_error: str | None = None
        self._sock: socket.socket | None = None
        self._parser = Parser()
        self._wlock = threading.Lock()  # every write, and swapping the socket
        self._state = "new"  # new | connecting | connected | dead | closed
        self._cv = threading.Condition()
        self._subs: dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        self._pongs: collections.deque[_Pong | None] = collections.deque()
        self._pings_out = 0
        self._reader: threading.Thread | None = None
        self._index = 0
        self._counters = dict.fromkeys(("reconnects", "msgs_in", "msgs_out", "bytes_in", "bytes_out",
                                        "errors", "pings_in", "pings_out", "dropped"), 0)

    # ---- connection ---------------------------------------------------------------------
    def connect(self) -> None:
        """Connect to the first reachable server (bounded like a reconnect), start the reader."""
        if not self._round("new"):
            raise NatsError(f"connect: client is {self._state}")

    def revive(self) -> None:
        """A dead client (reconnect budget spent) tries one more bounded round; subscriptions
        are re-issued. No-op unless dead."""
        self._round("dead")

    def _round(self, expect: str) -> bool:
        with self._cv:
            if self._state != expect:
                return False
            self._state = "connecting"
        if not self._establish(first=expect == "new"):
            self._set_state("dead")
            raise ConnectionLost(f"no NATS server reachable among {self._names()}: {self.last_error}")
        if expect == "dead":
            self._counters["reconnects"] += 1
        self._reader = threading.Thread(target=self._run, name=f"nats-reader-{self.name}", daemon=True)
        self._reader.start()
        return True

    def _names(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.servers)

    def _set_state(self, state: str) -> None:
        with self._cv:
            if self._state != "closed":
                self._state = state
            self._cv.notify_all()

    def _establish(self, first: bool) -> bool:
        """Try the servers in turn within the budget; on success the socket is installed, the
        SUBs re-issued, and the state is ``connected``."""
        deadline = time.monotonic() + self.reconnect_time_s
        attempts = 0
        start = self._index if first else self._index + 1
        while attempts < self.max_attempts and time.monotonic() < deadline and self._state != "closed":
            for k in range(len(self.servers)):
                if attempts >= self.max_attempts or self._state == "closed":
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                index = (start + k) % len(self.servers)
                attempts += 1
                try:
                    sock, parser, leftover = self._handshake(self.servers[index],
                                                             min(left, self.connect_timeout))
                except (OSError, NatsError, ValueError) as e:
                    self.last_error = f"{self.servers[index][0]}:{self.servers[index][1]}: {e}"
                    continue
                self._install(index, sock, parser)
                for op in leftover:
                    self._dispatch(op)
                return True
            time.sleep(min(self.reconnect_wait, max(0.0, deadline - time.monotonic())))
        return False

    def _handshake(self, server: tuple[str, int], timeout: float
                   ) -> tuple[socket.socket, Parser, list[Msg | Control]]:
        sock = socket.create_connection(server, timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            parser = Parser()
            ops: list[Msg | Control] = []
            info = self._read_until(sock, parser, ops, "INFO")
            self.server_info = json.loads(info.arg)
            opts = {"verbose": False, "pedantic": False, "name": self.name, "lang": "python-juice",
                    "version": "0.1.0", "protocol": 1, "echo": True}
            sock.sendall(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
            self._read_until(sock, parser, ops, "PONG")
            return sock, parser, ops
        except BaseException:
            sock.close()
            raise

    @staticmethod
    def _read_until(sock: socket.socket, parser: Parser, ops: list[Msg | Control], want: str) -> Control:
        while True:
            while ops:
                op = ops.pop(0)
                if isinstance(op, Control) and op.op == want:
                    return op
                if isinstance(op, Control) and op.op == "-ERR":
                    raise NatsError(f"server: {op.arg}")
                if isinstance(op, Control) and op.op == "PING":
                    sock.sendall(b"PONG\r\n")
            data = sock.recv(65536)
            if not data:
                raise NatsError(f"connection closed before {want}")
            ops.extend(parser.feed(data))

    def _install(self, index: int, sock: socket.socket, parser: Parser) -> None:
        sock.settimeout(self.ping_interval)  # also bounds a blocked sendall
        with self._wlock:
            old, self._sock = self._sock, sock
            self._parser = parser
            self._index = index
            self.current = self.servers[index]
            self._pings_out = 0
            self._fail_pongs()  # their PINGs went to a dead socket
            subs = list(self._subs.values())
            lines = b"".join(self._sub_line(s) for s in subs)
            try:
                if lines:
                    sock.sendall(lines)
            except OSError:
                pass  # the reader sees the broken socket next and reconnects again
        if old is not None:
            old.close()
        self._set_state("connected")

    def _run(self) -> None:
        """The reader thread: parse, dispatch, keep alive, reconnect (bounded)."""
        while self._state != "closed" and (sock := self._sock) is not None:
            why = self._read(sock)
            if why is None or self._state == "closed":
                continue
            self.last_error = why
            self._set_state("connecting")
            sock.close()
            if self._establish(first=False):
                self._counters["reconnects"] += 1
                continue
            self._set_state("dead")
            with self._wlock:
                self._fail_pongs()
            return

    def _read(self, sock: socket.socket) -> str | None:
        """One read and its dispatch; the reason the connection is to be dropped, or None."""
        try:
            data = sock.recv(65536)
        except TimeoutError:
            if self._pings_out >= self.max_pings_out:
                return f"{self._pings_out} PINGs unanswered"
            self._pings_out += 1
            self._write_ping(None)
            return None
        except OSError as e:
            return f"read: {e}"
        if not data:
            return "connection closed by the server"
        try:
            ops = self._parser.feed(data)
        except NatsError as e:
            return f"protocol: {e}"
        for op in ops:
            self._dispatch(op)
        return None

    def _fail_pongs(self) -> None:
        """Wake every flush still waiting (not ok); called under the write lock."""
        for p in self._pongs:
            if p is not None:
                p.done.set()
        self._pongs.clear()

    def _dispatch(self, op: Msg | Control) -> None:
        if isinstance(op, Msg):
            self._counters["msgs_in"] += 1
            self._counters["bytes_in"] += len(op.payload)
            sub = self._subs.get(op.sid)
            if sub is None:
                self._counters["dropped"] += 1  # arrived after its UNSUB
                return
            sub.received += 1
            try:
                sub.cb(op)
            except Exception as e:  # a callback must not kill the reader
                self.last_error = f"callback of {sub.subject}: {e!r}"
                self._counters["errors"] += 1
        elif op.op == "PING":
            self._counters["pings_in"] += 1
            try:
                self._write(b"PONG\r\n", wait=False)
            except ConnectionLost:
                pass  # the read side will notice
        elif op.op == "PONG":
            self._pings_out = 0
            with self._wlock:
                p = self._pongs.popleft() if self._pongs else None
            if p is not None:
                p.ok = True
                p.done.set()
        elif op.op == "-ERR":
            self._counters["errors"] += 1
            self.last_error = f"server: {op.arg}"
        elif op.op == "INFO":
            try:
                self.server_info.update(json.loads(op.arg))
            except ValueError:
                pass

    # ---- writing ------------------------------------------------------------------------
    def _wait_connected(self, deadline: float) -> None:
        with self._cv:
            while self._state not in ("connected", "dead", "closed"):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            if self._state != "connected":
                raise ConnectionLost(f"NATS client {self.name} is {self._state}: {self.last_error}")

    def _write(self, data: bytes, wait: bool = True, pong: _Pong | None = None, ping: bool = False,
               sub: Subscription | None = None, msgs: int = 0) -> None:
        """Send ``data`` on the current socket; with ``wait``, block while reconnecting (bounded
        by ``reconnect_time_s``) and send again on the new socket if the write failed. ``sub`` is
        registered under the same lock as its SUB line is written, so that a reconnect re-issues
        it exactly once (if the write fails, the re-issue does the job)."""
        deadline = time.monotonic() + self.reconnect_time_s
        while True:
            if wait:
                self._wait_connected(deadline)
            with self._wlock:
                sock = self._sock
                if sock is None or self._state in ("dead", "closed"):
                    raise ConnectionLost(f"NATS client {self.name} is {self._state}")
                if sub is not None:
                    self._subs[sub.sid] = sub
                try:
                    sock.sendall(data)
                    if ping:
                        self._pongs.append(pong)
                        self._counters["pings_out"] += 1
                    self._counters["msgs_out"] += msgs
                    self._counters["bytes_out"] += len(data) if msgs else 0
                    return
                except OSError as e:
                    self.last_error = f"write: {e}"
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # the reader notices and reconnects
            if sub is not None:
                return  # registered: re-issued by the reconnect
            if not wait or time.monotonic() >= deadline:
                raise ConnectionLost(f"NATS client {self.name}: write failed: {self.last_error}")
            with self._cv:
                if self._state == "connected" and self._sock is sock:
                    self._state = "connecting"

    def _write_ping(self, pong: _Pong | None) -> None:
        try:
            self._write(b"PING\r\n", wait=False, pong=pong, ping=True)
        except ConnectionLost:
            pass

    @staticmethod
    def _sub_line(s: Subscription) -> bytes:
        q = f" {s.queue}" if s.queue else ""
        return f"SUB {s.subject}{q} {s.sid}\r\n".encode()

    def publish(self, subject: str, payload: bytes, reply: str | None = None) -> None:
        """PUB (``bytes_out`` counts whole protocol lines)."""
        _check_token("subject", subject)
        if reply is not None:
            _check_token("reply subject", reply)
        limit = self.server_info.get("max_payload")
        if isinstance(limit, int) and len(payload) > limit:
            raise NatsError(f"payload of {len(payload)} bytes exceeds the server's max_payload {limit}")
        head = f"PUB {subject} {reply} {len(payload)}\r\n" if reply else f"PUB {subject} {len(payload)}\r\n"
        self._write(head.encode() + payload + b"\r\n", msgs=1)

    def subscribe(self, subject: str, cb: Callable[[Msg], None], queue: str | None = None) -> Subscription:
        """SUB (re-issued after every reconnect); ``cb`` runs in the reader thread."""
        _check_token("subject", subject)
        if queue is not None:
            _check_token("queue group", queue)
        sub = Subscription(next(self._sids), subject, queue, cb)
        self._write(self._sub_line(sub), sub=sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._wlock:
            if self._subs.pop(sub.sid, None) is None:
                return
            sock = self._sock
            if sock is not None and self._state == "connected":
                try:
                    sock.sendall(f"UNSUB {sub.sid}\r\n".encode())
                except OSError:
                    pass  # broken: the reconnect will not re-issue it

    def flush(self, timeout: float = 5.0) -> bool:
        """PING and wait for its PONG: True once the server processed everything sent before."""
        deadline = time.monotonic() + timeout
        pong = _Pong()
        self._wait_connected(deadline)
        self._write(b"PING\r\n", wait=False, pong=pong, ping=True)
        pong.done.wait(max(0.0, deadline - time.monotonic()))
        return pong.ok

    def close(self) -> None:
        with self._cv:
            if self._state == "closed":
                return
            self._state = "closed"
            self._cv.notify_all()
        with self._wlock:
            sock, self._sock = self._sock, None
            self._fail_pongs()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=5)

    @property
    def state(self) -> str:
        return self._state

    def stats(self) -> dict[str, Any]:
        cur = f"{self.current[0]}:{self.current[1]}" if self.current else None
        return {**self._counters, "state": self._state, "server": cur,
                "server_name": self.server_info.get("server_name"), "subscriptions": len(self._subs),
                "last_error": self.last_error}
