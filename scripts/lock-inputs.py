"""Which top-level pins each lock file in scripts/lock/ was resolved from.

    python3 scripts/lock-inputs.py --write   # (scripts/lock.sh) record the digest in each lock
    python3 scripts/lock-inputs.py --check   # (scripts/setup.sh) fail when a lock is out of date

Each lock carries a line `# inputs: sha256 <digest>` over the pins it was resolved from (only
those: editing a comment or [tool.*] in pyproject.toml does not make a lock stale):
juice = [project] dependencies + the `dev` extra, build = [build-system] requires,
openstack / rally / messaging = the requirement lines of scripts/requirements-<name>.txt. (uv.txt is
written from UV_VERSION in scripts/lock.sh itself.) Python 3.11 standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "scripts" / "lock"
MARK = re.compile(r"^# inputs: sha256 ([0-9a-f]{64})\b", re.M)


def _requirements(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def inputs() -> dict[str, object]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {
        "juice": [
            project["project"]["dependencies"],
            project["project"].get("optional-dependencies", {}).get("dev", []),
        ],
        "build": project["build-system"]["requires"],
        "openstack": _requirements(ROOT / "scripts" / "requirements-openstack.txt"),
        "rally": _requirements(ROOT / "scripts" / "requirements-rally.txt"),
        "messaging": _requirements(ROOT / "scripts" / "requirements-messaging.txt"),
    }


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def main(argv: list[str]) -> int:
    if argv not in (["--write"], ["--check"]):
        print("usage: lock-inputs.py --write | --check", file=sys.stderr)
        return 2
    for name, value in inputs().items():
        lock = LOCKS / f"{name}.txt"
        want = digest(value)
        text = lock.read_text() if lock.exists() else ""
        if argv == ["--write"]:
            lines = [line for line in text.splitlines(keepends=True) if not MARK.match(line)]
            # after uv's two header lines
            lines.insert(2, f"# inputs: sha256 {want} (scripts/lock-inputs.py)\n")
            lock.write_text("".join(lines))
            continue
        found = MARK.search(text)
        if not found or found.group(1) != want:
            source = {"juice": "pyproject.toml", "build": "pyproject.toml [build-system]"}.get(
                name, f"scripts/requirements-{name}.txt"
            )
            print(
                f"setup.sh: scripts/lock/{name}.txt is out of date with {source}; "
                "run 'bash scripts/lock.sh' and commit scripts/lock/",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
