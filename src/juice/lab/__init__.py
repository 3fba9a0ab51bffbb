"""The lab: sites with an emulated WAN between them (see ``local`` for the Python API)."""

from juice.lab.local import LocalLab

__all__ = ["LocalLab"]
