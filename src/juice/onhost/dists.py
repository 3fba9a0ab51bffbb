"""What a venv holds, asked of the venv's own Python AT a place (where the servers or agents
run). Standard library only.

    python -c "$(source dists)" versions NAME...      # {"keystone": "27.0.0", "x": "unknown"}
    python -c "$(source dists)" require MODULE DIST   # DIST's version; exit 1 without MODULE

``versions``: the OpenStack venv's distributions (``juice.services.openstack.keystone``);
``require``: the messaging venv holds the agents' module, and which oslo.messaging
(``juice.studies.messaging.agents``). A distribution that ``require`` does not find is an error
(its traceback's last line says which).
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import json
import sys


def versions(names: list[str]) -> dict[str, str]:
    """Each distribution's version ("unknown" when it is not installed)."""
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "unknown"
    return out


def require(module: str, dist: str) -> str:
    """``dist``'s version, once ``module`` is found (SystemExit naming it when it is not);
    imports neither."""
    if importlib.util.find_spec(module) is None:
        sys.exit(f"no module {module}")
    return metadata.version(dist)


def main(argv: list[str]) -> None:
    if argv[0] == "versions":
        print(json.dumps(versions(argv[1:])))
    elif argv[0] == "require":
        print(require(argv[1], argv[2]))
    else:
        sys.exit(f"dists: unknown operation {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
