"""The nova study (seeds 002, 004): Rally-style boots against real nova with simulated computes."""

from juice.studies.nova.study import NovaStudy

STUDY = NovaStudy()

__all__ = ["STUDY", "NovaStudy"]
