"""Atomic-action names: the newer rally-openstack ``keystone.<op>`` form -> the legacy
``keystone_v3.<op>`` form that rally-openstack 4.1.0 (and Juice's scenarios) emit.

    legacy_name("keystone.create_user")      -> "keystone_v3.create_user"
    legacy_name("keystone_v3.create_user")   -> "keystone_v3.create_user"  (unchanged)
    legacy_name("nova.boot_server")          -> "nova.boot_server"         (not Keystone: unchanged)

4.1.0 times ``get_service`` as ``keystone_v3.get_services`` (plural, a quirk of its
``KeystoneMixin``); the newer ``keystone.get_service`` maps to that legacy name so the two
versions' results line up.
"""

from __future__ import annotations

NEW_PREFIX = "keystone."
LEGACY_PREFIX = "keystone_v3."
RENAMED = {"get_service": "get_services"}


def legacy_name(name: str) -> str:
    """The legacy ``keystone_v3.<op>`` name of an atomic action (other names unchanged)."""
    if not name.startswith(NEW_PREFIX):
        return name
    op = name[len(NEW_PREFIX):]
    return LEGACY_PREFIX + RENAMED.get(op, op)
