"""Executes experiment specs: the Keystone study runner (resumable sweeps)."""
