"""Analyses of tidy results: describe tables, percentile filter, per-iteration totals, λ, σ,
stacked means, CDFs (pure functions on the DataFrame of ``juice.results.tidy.load``)."""

from juice.analysis.describe import describe, filter_percentile
from juice.analysis.stats import cdf, cdfs, group_summary, iteration_totals, stacked_means

__all__ = ["cdf", "cdfs", "describe", "filter_percentile", "group_summary", "iteration_totals",
           "stacked_means"]
