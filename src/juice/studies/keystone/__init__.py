"""The Keystone study (seed 000): the seven Rally Keystone scenarios against a Keystone in
every site, on MariaDB, Galera, PostgreSQL or CockroachDB, across site counts, WAN delays and
loads. ``STUDY`` is its ``juice.contract.Study`` (``study``). Beside it: the spec (``spec``),
the run matrix (``matrix``), labs, deployments and runs (``run``, ``drive``, ``env``), the
scenarios and their names (``scenarios``, ``catalog``, ``names``), runs against an existing
cloud (``target``, ``dryrun``, ``safety``), fault hands (``faults``), the estimate for
``juice plan`` (``estimate``) and the report section (``report``, ``figures``, ``findings``,
``seeds``, ``runorder``, ``ordercause``, ``writes``)."""

from juice.studies.keystone.study import KeystoneStudy

STUDY = KeystoneStudy()
