"""One HTTP GET made AT a place (``juice.lab.place.http_get``: a monitoring API's JSON, larger
than ``Place.http``'s head), with the place's ``python3``. Standard library only (Python >= 3.7).

    python3 -c "$(source http_get)" URL TIMEOUT_S

The body (at most 64 MiB) on stdout; exit 1 with ``GET URL: ERROR: why`` on stderr.
"""

from __future__ import annotations

import sys
import urllib.request

MAX_BYTES = 64 << 20


def get(url: str, timeout: float, max_bytes: int = MAX_BYTES) -> bytes:
    """The body of ``GET url`` (its first ``max_bytes``); raises on any failure."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body: bytes = r.read(max_bytes)
    return body


def main(argv: list[str]) -> None:
    try:
        sys.stdout.buffer.write(get(argv[0], float(argv[1])))
    except Exception as e:
        sys.exit(f"GET {argv[0]}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
