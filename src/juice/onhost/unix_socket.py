"""One command on a UNIX stream socket and its whole answer (haproxy's stats socket:
``juice.services.balancers.haproxy``), run AT the place with its ``python3``. Standard library
only (Python >= 3.7).

    python3 -c "$(source unix_socket)" SOCKET_PATH "show info"    # the answer on stdout
"""

from __future__ import annotations

import socket
import sys

MAX_CHUNKS = 100000


def command(path: str, cmd: str, timeout: float = 5.0) -> bytes:
    """``cmd`` and a newline sent to the socket at ``path``; what it answers until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((cmd + "\n").encode())
        buf = b""
        for _ in range(MAX_CHUNKS):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf


def main(argv: list[str]) -> None:
    sys.stdout.write(command(argv[0], argv[1]).decode(errors="replace"))


if __name__ == "__main__":
    main(sys.argv[1:])
