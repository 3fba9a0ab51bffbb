"""The WSGI module gunicorn loads for an OpenStack API (nova's, neutron's): it empties
``sys.argv`` before importing the app, because oslo.config parses ``sys.argv`` when the app
initializes and a gunicorn worker inherits gunicorn's command line. Written at the place as
``juice_<service>_api_wsgi.py`` by ``juice.services.openstack.os_api.argv_shim``, which sets
``APP`` (the app's module and attribute); run by the OpenStack venv's gunicorn. Standard library
only.
"""

import importlib
import sys

APP = ("", "application")  # (module, attribute): set when written

sys.argv = sys.argv[:1]
application = getattr(importlib.import_module(APP[0]), APP[1])
