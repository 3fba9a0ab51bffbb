"""Pass/fail criteria (Rally's SLA and more): ``criteria`` (the spec's ``sla:``), ``rally``
(Rally's six criteria, Rally's semantics), ``judge`` (a run or a Rally workload against them),
``store`` (the verdict into a run's manifest and rally.json)."""
