"""Fault injection: the schedule in a spec (``spec``), applied during a run's measured window
(``runner``: kill by recorded pid, restart, partition, WAN change, through the lab interface and
a study's ``FaultTarget``), cut into windows (``analysis``) and shown in reports (``report``)."""
