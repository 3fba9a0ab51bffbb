"""The Keystone study's scenarios by name (what its specs and load drivers ask for).

    registry.names()                                   # canonical names, sorted
    registry.canonical("create_user_update_password")  # "KeystoneBasic.create_user_update_password"
    scenario = registry.get("keystone.create_and_list_users", {"session": "reuse"},
                            contexts={"users": {"tenants": 2, "users_per_tenant": 3}})

Accepted spellings of a Keystone scenario: Rally's ``KeystoneBasic.<op>``, the bare ``<op>``,
and the newer rally-openstack / Juice spec style ``keystone.<op>`` (prefix case-insensitive).
An unknown name is a UserError listing the choices.
"""

from __future__ import annotations

from juice.errors import UserError
from juice.load.api import Scenario
from juice.studies.keystone.scenarios import SCENARIOS, KeystoneScenario

_BY_NAME: dict[str, type[KeystoneScenario]] = {cls.name: cls for cls in SCENARIOS}
_PREFIXES = ("keystonebasic.", "keystone.", "keystone_v3.")


def names() -> list[str]:
    return sorted(_BY_NAME)


def known(name: str) -> bool:
    """True when ``name`` (any accepted spelling) names a Keystone scenario."""
    try:
        canonical(name)
    except UserError:
        return False
    return True


def canonical(name: str) -> str:
    """The canonical (Rally) name of ``name``; UserError when it names no scenario."""
    n = name.strip()
    if n in _BY_NAME:
        return n
    op = n
    for p in _PREFIXES:
        if n.lower().startswith(p):
            op = n[len(p):]
            break
    full = "KeystoneBasic." + op
    if full in _BY_NAME:
        return full
    raise UserError(f"scenario: unknown {name!r} (choose one of {', '.join(names())})")


def get(name: str, args: dict[str, object] | None = None, contexts: dict[str, object] | None = None,
        seed: int | None = None) -> Scenario:
    """A new scenario object (nothing contacted yet); UserError on a bad name or argument."""
    return _BY_NAME[canonical(name)](args, contexts, seed)
