"""Programs that run AT a place (a site's namespace or an SSH host) rather than in Juice's
process: each is one module here, sent as its own source (``source(name)``) and run there with
``python3 -c`` (or written to a file the place runs), so it is type-checked, linted and
unit-tested here like the rest and written once.

Where Juice is not installed (an SSH host), a program can import nothing from Juice: every
module here imports the standard library only (Python >= 3.7 for those run with the place's
``python3``; ``sampler`` also ``procfs``, shipped with it), and those run with a venv's Python
may import what that venv holds, inside ``main`` (``tests/onhost/test_programs.py`` checks
both). The package sits at the bottom of the
import layers: anything may read a program's source, and a program imports nothing above it.

    logfiles          log sizes and tails (``juice.services.logslice``; Juice's venv path)
    http_get          one HTTP GET (``juice.lab.place.http_get``; the place's python3)
    unix_socket       one command on a UNIX socket (haproxy's stats socket; python3)
    memcached_stats   ``stats`` over memcached's text protocol (python3)
    dists             distributions' versions in a venv; a venv's module check
    keystone_api      Keystone's regions/endpoints and its pre-warm requests (OpenStack venv)
    keystone_wsgi     the WSGI module gunicorn loads for Keystone, with ``gc_probe`` beside it
    wsgi_argv         the WSGI module gunicorn loads for nova's and neutron's APIs (its app set)
    gc_probe          each full garbage collection of a worker, logged (written as a file)
    osprofiler_reader OSProfiler's notifications read from its backend (OpenStack venv)
    amqp_declare      exchanges and queues declared on a broker (messaging venv)

    procfs            the /proc readers, written once (the local sampler's and ``sampler``'s)
    sampler           the resource sampler run on SSH hosts (``juice.profile.ssh``/``hosts``),
                      shipped with ``procfs`` by ``juice.hosts.bundle`` (modules by name)

The host agent, shipped as one file, is ``juice.hosts.agent``.
"""

from __future__ import annotations

from pathlib import Path


def source(name: str) -> str:
    """The source of ``juice.onhost.<name>``, as sent to a place."""
    return (Path(__file__).parent / f"{name}.py").read_text()
