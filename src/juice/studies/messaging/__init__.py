"""The messaging study (seed 003): oslo.messaging RPC (call, cast, fanout) over RabbitMQ clusters,
a federated RabbitMQ mesh and NATS (one cluster, or a cluster per site joined by gateways), with
real agents (plugins/juice-messaging) placed in lab sites, open-loop load, and every message
counted by id. See ``spec`` for the spec, ``study`` for a run, ``report`` for the figures."""

from juice.studies.messaging.study import Messaging

STUDY = Messaging()

__all__ = ["STUDY", "Messaging"]
