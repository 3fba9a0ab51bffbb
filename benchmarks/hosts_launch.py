"""Separate test hosts on this machine, for benchmarks/hosts_acceptance.py (or by hand): brings
up N hosts (tests/testhosts.py: each its own root filesystem, mount, PID and network namespace,
sshd and clock) with the given clock offsets, writes a hosts inventory in the static
provider's format, and keeps them up until Ctrl-C or SIGTERM (then everything is removed).

    /var/cache/juice/venv/bin/python benchmarks/hosts_launch.py --out /var/tmp/inv.yaml \\
        --offsets 0,+3,-2 [--bare] &
    # ... wait for "ready" in its output, then:
    /var/cache/juice/venv/bin/python benchmarks/hosts_acceptance.py /var/tmp/inv.yaml
    kill %1

These hosts are NAMESPACES of this one machine (one kernel, its CPUs and memory), not virtual
machines: what they separate is the file system, the processes, the clock and the network
path; hardware virtualisation is not usable here. Without ``--bare`` they start from the test
hosts' prepared layer (what ``juice hosts prepare`` installed on a build host: Debian packages,
venvs, helpers), so ``juice hosts prepare`` on them copies what differs and re-runs setup.sh
idempotently; with ``--bare`` they are the bare Debian 12 image (+ python3, libfaketime) and
reach no registry (the lab's sites have no route out): prepare them with ``--offline``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT):  # juice, and tests.testhosts (the test hosts)
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from tests import testhosts  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--offsets", default="0,+3,-2", help="each host's clock minus the truth, seconds")
    ap.add_argument("--out", type=Path, required=True, help="the inventory (YAML) to write")
    ap.add_argument("--bare", action="store_true", help="the bare image, not the prepared layer")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay between the hosts' sites")
    a = ap.parse_args()
    offsets = [float(x) for x in a.offsets.split(",")]
    if len(offsets) != a.hosts:
        ap.error(f"--offsets: {len(offsets)} values for {a.hosts} hosts")
    if testhosts.available() is not None:
        sys.exit(f"test hosts: {testhosts.available()}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds like Ctrl-C
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="juice-launch-", dir="/var/tmp") as tmp, \
            testhosts.test_hosts(a.hosts, Path(tmp) / "hosts", offsets, prepared=not a.bare,
                                 delay_ms=a.delay_ms, progress=print) as (_lab, hosts):
        inv = {"hosts": [{"address": h.address, "port": h.port, "user": h.user, "key_file": h.key_file,
                          "wan_address": h.wan_address} for h in hosts],
               "true_offsets_s": offsets,
               "note": "test hosts (tests/testhosts.py): network namespaces of one machine, not VMs"}
        a.out.write_text(yaml.safe_dump(inv, sort_keys=False))
        print(f"ready: {a.hosts} hosts in {time.monotonic() - t0:.1f} s "
              f"({'bare image' if a.bare else 'prepared layer'}), inventory {a.out}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            a.out.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
