"""Juice's driver made loadable by nova: ``compute_driver = juice_fake.MultiNodeFakeDriver``.

nova resolves ``[DEFAULT] compute_driver`` as ``nova.virt.<value>`` with
``importutils.import_object`` (no fall-back to a full dotted path), so a driver outside nova's
tree cannot be named directly: ``register_driver`` makes ``juice_nova.virt`` importable as
``nova.virt.juice_fake`` (nothing is written into nova's installed package). Used by both
launchers: ``juice_nova.compute`` (one process) and ``juice_nova.fork`` (a process per node).
"""

from __future__ import annotations

import sys

ALIAS = "nova.virt.juice_fake"


def register_driver() -> None:
    """Make ``juice_nova.virt`` importable as ``nova.virt.juice_fake``."""
    import nova.virt

    from juice_nova import virt

    sys.modules[ALIAS] = virt
    nova.virt.juice_fake = virt
