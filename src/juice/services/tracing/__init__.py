"""Trace collectors: Jaeger (OTLP) and OSProfiler's traces read back from Redis."""
