"""The WSGI module gunicorn loads for Keystone (written at the place as ``juice_keystone_wsgi.py``,
``gc_probe`` beside it as ``juice_gc_probe.py``; run by the OpenStack venv's gunicorn).

oslo.config parses ``sys.argv`` when Keystone initializes, and a worker inherits gunicorn's
command line, so the module empties it first (config comes from ``OS_KEYSTONE_CONFIG_DIR``);
then, once Keystone is imported, each full garbage collection of the worker is logged.
"""

import sys

sys.argv = sys.argv[:1]
from juice_gc_probe import install  # noqa: E402
from keystone.wsgi.api import application  # noqa: E402,F401

install()
