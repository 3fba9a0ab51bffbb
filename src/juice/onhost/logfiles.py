"""Log files at a place (``juice.services.logslice``): their sizes, and their tails from given
offsets copied into a directory. Standard library only; prints one JSON object.

    python3 -c "$(source logfiles)" sizes PATH...                  # {path: bytes} (0: absent)
    python3 -c "$(source logfiles)" slice DEST PATH START [PATH START...]  # {path: bytes copied}

The n-th slice is written to ``DEST/n``.
"""

from __future__ import annotations

import json
import os
import sys


def sizes(paths: list[str]) -> dict[str, int]:
    out = {}
    for p in paths:
        try:
            out[p] = os.path.getsize(p)
        except OSError:
            out[p] = 0
    return out


def slices(dest: str, args: list[str]) -> dict[str, int]:
    out = {}
    os.makedirs(dest, exist_ok=True)
    for i in range(0, len(args), 2):
        src, start = args[i], int(args[i + 1])
        try:
            with open(src, "rb") as f, open(os.path.join(dest, str(i // 2)), "wb") as o:
                f.seek(start)
                n = 0
                while chunk := f.read(1 << 20):
                    o.write(chunk)
                    n += len(chunk)
            out[src] = n
        except OSError:
            out[src] = 0
    return out


def main(argv: list[str]) -> None:
    op, args = argv[0], argv[1:]
    print(json.dumps(sizes(args) if op == "sizes" else slices(args[0], args[1:])))


if __name__ == "__main__":
    main(sys.argv[1:])
