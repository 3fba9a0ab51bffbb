"""Real components deployed inside lab sites (see ``base`` for the lifecycle, ``deploy``
for the entry point the runner and the CLI use)."""

from juice.services.base import Endpoint, Endpoints, Service
from juice.services.kinds import KINDS, build, deploy

__all__ = ["KINDS", "Endpoint", "Endpoints", "Service", "build", "deploy"]
