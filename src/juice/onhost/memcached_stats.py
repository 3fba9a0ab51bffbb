"""``stats`` over memcached's text protocol, asked AT a place (from inside the site:
``juice.services.caches.memcached``) with its ``python3``. Standard library only
(Python >= 3.7).

    python3 -c "$(source memcached_stats)" IP PORT      # {"pid": "123", "uptime": "5", ...}
"""

from __future__ import annotations

import json
import socket
import sys


def parse(text: str) -> dict[str, str]:
    """``{name: value}`` of the ``STAT name value`` lines of an answer."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = parts[2]
    return out


def stats(host: str, port: int, timeout: float = 3.0) -> dict[str, str]:
    """The ``stats`` of the memcached at ``host:port``."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(b"stats\r\n")
        buf = b""
        for _ in range(1000):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if buf.endswith(b"END\r\n"):
                break
    finally:
        s.close()
    return parse(buf.decode(errors="replace"))


def main(argv: list[str]) -> None:
    print(json.dumps(stats(argv[0], int(argv[1]))))


if __name__ == "__main__":
    main(sys.argv[1:])
