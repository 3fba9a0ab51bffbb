"""``juice-nova-compute``: nova 34's own nova-compute, with Juice's driver loadable.

nova resolves ``[DEFAULT] compute_driver`` as ``nova.virt.<value>`` with
``importutils.import_object`` (no fall-back to a full dotted path, unlike ``import_object_ns``),
so a driver outside nova's tree cannot be named directly. This launcher applies nova's
concurrency choice first (``nova.monkey_patch.patch``, exactly as ``nova.cmd.compute`` does on
import), then registers ``juice_nova.virt`` as the module ``nova.virt.juice_fake`` and runs
``nova.cmd.compute.main()`` unchanged: ``compute_driver = juice_fake.MultiNodeFakeDriver``.
Nothing is written into nova's installed package.

``juice-nova-compute --fork-nodes DIR... --pids-file PATH`` runs one nova-compute per simulated
node instead, forked from one parent that imported nova once (``juice_nova.fork``).
"""

from __future__ import annotations

import sys

from juice_nova.driver import ALIAS as ALIAS  # re-exported
from juice_nova.driver import register_driver


def main() -> None:
    if "--fork-nodes" in sys.argv[1:]:  # one child per simulated node (juice_nova.fork)
        from juice_nova import fork

        sys.exit(fork.main(sys.argv[1:]))
    from nova import monkey_patch

    monkey_patch.patch(backend="threading")  # what nova.cmd.compute does first
    register_driver()
    from nova.cmd import compute

    compute.main()


if __name__ == "__main__":
    main()
