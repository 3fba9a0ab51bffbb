"""juice_messaging.natsproto (stdlib only, loaded from its file: the plugin is installed in the
messaging venv, not in Juice's): the incremental parser, split anywhere; the server list; and
the client against a scripted fake server on loopback (handshake, SUB/MSG, PING/PONG, flush,
reconnect to the next server with the SUBs re-issued)."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

SRC = Path(__file__).resolve().parents[1] / "plugins/juice-messaging/src/juice_messaging/natsproto.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("juice_natsproto_under_test", SRC)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


np = _load()

STREAM = (b'INFO {"server_id":"X","max_payload":1048576}\r\n'
          b"MSG a.b 1 _INBOX.z.1 5\r\nhello\r\n"
          b"PING\r\n"
          b"MSG a.b 2 4\r\n\r\n\r\n\r\n"      # a payload that is itself CRLF CRLF
          b"HMSG c.d 3 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
          b"+OK\r\nPONG\r\n-ERR 'Unknown Protocol Operation'\r\n"
          b"MSG e 9 0\r\n\r\n")
EXPECTED = [np.Control("INFO", '{"server_id":"X","max_payload":1048576}'),
            np.Msg("a.b", 1, "_INBOX.z.1", b"hello"), np.Control("PING"),
            np.Msg("a.b", 2, None, b"\r\n\r\n"), np.Msg("c.d", 3, None, b"hi", b"NATS/1.0\r\n\r\n"),
            np.Control("+OK"), np.Control("PONG"), np.Control("-ERR", "'Unknown Protocol Operation'"),
            np.Msg("e", 9, None, b"")]


def test_parser_whole_and_split_at_every_byte() -> None:
    assert np.Parser().feed(STREAM) == EXPECTED
    for cut in range(1, len(STREAM)):
        p = np.Parser()
        assert p.feed(STREAM[:cut]) + p.feed(STREAM[cut:]) == EXPECTED, cut
    p = np.Parser()
    assert [op for b in STREAM for op in p.feed(bytes([b]))] == EXPECTED


def test_parser_rejects_garbage() -> None:
    with pytest.raises(np.NatsError, match="bad MSG"):
        np.Parser().feed(b"MSG a.b x 3\r\n")
    with pytest.raises(np.NatsError, match="CRLF"):
        np.Parser().feed(b"MSG a.b 1 3\r\nabcXY")
    with pytest.raises(np.NatsError, match="unknown"):
        np.Parser().feed(b"HELLO\r\n")


def test_parse_servers() -> None:
    assert np.parse_servers("nats://10.0.0.1:4222,10.0.0.2:4223/") == [("10.0.0.1", 4222), ("10.0.0.2", 4223)]
    assert np.parse_servers(["nats://u:p@h1", "h2:5"]) == [("h1", 4222), ("h2", 5)]
    with pytest.raises(np.NatsError):
        np.parse_servers("nats:///")


class FakeServer:
    """Accepts connections on loopback, sends INFO, answers PING, records every line."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        c.sendall(b'INFO {"server_id":"F","max_payload":64}\r\n')
        buf = b""
        while True:
            try:
                data = c.recv(4096)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                self.lines.append(line.decode())
                if line == b"PING":
                    c.sendall(b"PONG\r\n")

    def wait_line(self, want: str, bound: float = 5.0) -> None:
        deadline = time.monotonic() + bound
        while want not in self.lines:
            assert time.monotonic() < deadline, (want, self.lines)
            time.sleep(0.01)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)  # close() alone sends no FIN while a recv blocks
            c.close()


def test_client_against_fake_servers() -> None:
    a, b = FakeServer(), FakeServer()
    got: list[object] = []
    client = np.Client(f"nats://127.0.0.1:{a.port},127.0.0.1:{b.port}/", name="t", reconnect_time_s=5)
    try:
        client.connect()
        connect = next(x for x in a.lines if x.startswith("CONNECT "))
        assert '"verbose": false' in connect and '"pedantic": false' in connect and '"name": "t"' in connect
        client.subscribe("a.b", got.append, queue="grp")
        assert client.flush(timeout=5) and "SUB a.b grp 1" in a.lines
        a.conns[0].sendall(b"PING\r\nMSG a.b 1 _INBOX.r.1 2\r\nhi\r\n")
        a.wait_line("PONG")  # the client answers the server's PING
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == [np.Msg("a.b", 1, "_INBOX.r.1", b"hi")]
        with pytest.raises(np.NatsError, match="max_payload"):
            client.publish("x", b"y" * 65)
        a.close()  # the server goes away: the client moves to b and re-issues its SUB
        b.wait_line("SUB a.b grp 1")
        assert client.flush(timeout=5)  # connected to b again
        client.publish("x.y", b"after", reply="_INBOX.r.2")
        b.wait_line("PUB x.y _INBOX.r.2 5")
        st = client.stats()
        assert st["reconnects"] == 1 and st["server"] == f"127.0.0.1:{b.port}" and st["msgs_in"] == 1
    finally:
        client.close()
        b.close()
    assert client.state == "closed"
    with pytest.raises(np.ConnectionLost):
        client.publish("x", b"")
