"""A loopback TCP forwarder into a site: ``127.0.0.1:PORT`` on this host → ``IP:PORT`` in a site.

    python -m juice.lab.forward --ns juice-lab-s1 --listen 127.0.0.1:0 --to 10.210.1.2:5000 \\
        --port-file /run/.../port

It lets a program on this host (``juice run`` with a ``target:``, an openstack CLI) reach a
server of a lab the way it reaches a user's cloud, without a route from the host into the
lab. The listening socket is made in the host's network namespace, on loopback only; then
the process moves itself into the site's namespace (``setns``), so every connection it opens
to the server is a connection inside the site, and the process is one of the site's:
``juice lab down`` (and the crash sweep) stops it with the site's other processes.

Bounded: at most ``--max-conns`` connections at once (more wait in the backlog); each copy
loop ends when either side closes. The chosen port is written to ``--port-file`` (atomically)
once the forwarder accepts.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import sys
import threading
from pathlib import Path

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
CHUNK = 65536


def setns(ns: str) -> None:
    """Move this (single-threaded) process into the named network namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / ns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({ns}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _serve_one(client: socket.socket, to: tuple[str, int], slots: threading.BoundedSemaphore) -> None:
    try:
        try:
            upstream = socket.create_connection(to, timeout=10)
        except OSError:
            return
        upstream.settimeout(None)
        with upstream:
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()
    finally:
        client.close()
        slots.release()


def _addr(text: str, what: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SystemExit(f"{what}: expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m juice.lab.forward")
    ap.add_argument("--ns", required=True, help="the site's network namespace (juice-...)")
    ap.add_argument("--listen", default="127.0.0.1:0", help="loopback HOST:PORT on this host")
    ap.add_argument("--to", required=True, help="HOST:PORT inside the site")
    ap.add_argument("--port-file", type=Path, required=True)
    ap.add_argument("--max-conns", type=int, default=256)
    a = ap.parse_args(argv)
    if not a.ns.startswith("juice-"):
        raise SystemExit("--ns: only a Juice namespace (juice-...)")
    host, port = _addr(a.listen, "--listen")
    if host not in ("127.0.0.1", "localhost"):
        raise SystemExit("--listen: loopback only (127.0.0.1)")
    to = _addr(a.to, "--to")
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(128)
    setns(a.ns)  # from here on, new sockets are the site's; the listener stays on the host
    tmp = a.port_file.with_name(a.port_file.name + ".tmp")
    tmp.write_text(f"{srv.getsockname()[1]}\n")
    os.replace(tmp, a.port_file)
    slots = threading.BoundedSemaphore(max(1, a.max_conns))
    while True:
        slots.acquire()
        try:
            client, _ = srv.accept()
        except OSError:
            slots.release()
            continue
        threading.Thread(target=_serve_one, args=(client, to, slots), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
