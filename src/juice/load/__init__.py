"""Juice's load engine: Rally-compatible closed loop, open loop with intended-time latency,
drivers inside site namespaces, Rally JSON export.

- ``api``: the contract (Scenario, Iteration, atomic actions, IterationRecord, LoadResult).
- ``runner``: ``RunnerSpec`` and ``run_scenario`` (setup → window → cleanup).
- ``engine`` / ``openloop``: the closed and the open loop.
- ``drivers``: ``DriverJob`` and ``run_drivers`` (one process per site); ``juice.driver``
  (above the studies, which name the scenarios) is the process's entry point
  (``python -m juice.driver JOB_FILE``).
- ``progress``: the one progress bar; ``rally_json`` and ``iterations``: output files.
"""
