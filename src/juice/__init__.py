"""Juice: measure the OpenStack control plane at scale and at the edge."""

__version__ = "0.1.0"
