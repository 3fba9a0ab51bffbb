"""The study contract, under its first name: it lives in :mod:`juice.contract` (below the
runner, which drives studies through it); studies written against ``juice.studies.base``
keep working unchanged."""

from juice.contract import Point, Progress, ReportInput, Run, SpecLike, Study

__all__ = ["Point", "Progress", "ReportInput", "Run", "SpecLike", "Study"]
