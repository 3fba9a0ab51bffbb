"""The scheduler–database study (seed 001): the scheduler's read of every compute node's
state as N grows, under N/60 updates per second, with 1/3/9 schedulers, on MariaDB, Galera,
PostgreSQL and the cache alternative (memcached, Redis). ``STUDY`` is its
``juice.contract.Study``; ``spec.parse``, ``study.expand``, ``report.section`` /
``report.summary`` are the pieces."""

from juice.studies.schedulerdb.study import SchedulerDbStudy

STUDY = SchedulerDbStudy()
