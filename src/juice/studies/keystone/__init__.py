"""The Keystone study (seed 000): the seven Rally Keystone scenarios against a Keystone in
every site, on MariaDB, Galera, PostgreSQL or CockroachDB, across site counts, WAN delays and
loads. ``STUDY`` is its ``juice.contract.Study``; the Rally-compatible scenarios, their
contexts and the async Keystone client live beside it (``scenarios``, ``contexts``,
``client``, ``catalog``)."""

from juice.studies.keystone.study import KeystoneStudy

STUDY = KeystoneStudy()
