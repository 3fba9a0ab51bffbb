"""Executes experiment specs of every study: resumable sweeps (``sweep``), labs and deployments reused."""
