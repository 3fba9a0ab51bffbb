"""One Python program made of real modules, for a host that does not have Juice installed.

    src = bundle.program([("juice.onhost.procfs", inspect.getsource(procfs)),
                          ("juice.onhost.sampler", inspect.getsource(sampler))],
                         "import juice.onhost.sampler as m; m.main(...)")
    ssh host "$(boot_command(src))" < src          # juice.hosts.ssh.boot_command

Code that runs on hosts is written as ordinary modules of this package (standard library
only, Python >= 3.7 there), type-checked, linted and unit-tested here like the rest. To ship
them, each module's source becomes a module of the remote interpreter under its own name
(``sys.modules``, parent packages as empty namespaces), in the order given, so one imports
another exactly as it does here (``from juice.onhost import procfs``); then ``main`` runs.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Sequence


def _juice_module(name: str, src: str) -> None:
    """Shipped as is (its source): ``src`` as module ``name`` of the remote interpreter."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg not in sys.modules:
            m = types.ModuleType(pkg)
            m.__path__ = []
            sys.modules[pkg] = m
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], m)
    mod = types.ModuleType(name)
    mod.__file__ = f"<{name}>"
    sys.modules[name] = mod
    if len(parts) > 1:
        setattr(sys.modules[".".join(parts[:-1])], parts[-1], mod)
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)


def program(modules: Sequence[tuple[str, str]], main: str) -> bytes:
    """``modules`` (``(name, source)``, dependencies first) loaded, then ``main`` (a statement)."""
    parts = ["import sys, types\n", inspect.getsource(_juice_module)]
    parts += [f"_juice_module({name!r}, {src!r})\n" for name, src in modules]
    parts.append(main.rstrip("\n") + "\n")
    return "".join(parts).encode()
