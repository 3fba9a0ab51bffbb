"""RabbitMQ's rates and depths from its Prometheus endpoint: parsing what RabbitMQ 3.10 answers
(lines recorded from a real node) and the per-second frame (no server: the nova runs' real
brokers are sampled in tests/studies/nova/test_nova_run.py)."""

from __future__ import annotations

import pandas as pd

from juice.services.buses import mqstats
from juice.services.buses.rabbitmq import Node, plan_nodes, render_conf

METRICS = """# TYPE rabbitmq_global_messages_received_total counter
rabbitmq_global_messages_received_total{protocol="amqp091"} 120
rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 100
rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_quorum_queue"} 10
rabbitmq_global_messages_redelivered_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 2
rabbitmq_global_messages_acknowledged_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 50
rabbitmq_queue_messages_ready 7
rabbitmq_queue_messages_unacked 3
rabbitmq_queues 12
rabbitmq_connections 9
rabbitmq_global_messages_received_confirm_total{protocol="amqp091"} 0
"""


def test_counters_and_gauges_are_summed_over_their_labels() -> None:
    v = mqstats.parse(METRICS)
    assert v == {"received": 120, "delivered": 110, "redelivered": 2, "acknowledged": 50, "ready": 7,
                 "unacked": 3, "queues": 12, "connections": 9}


def test_rates_per_second_and_a_node_missing_from_a_sample_gives_no_rate() -> None:
    a = mqstats.parse(METRICS)
    b = {**a, "received": 160.0, "delivered": 130.0, "ready": 1.0}
    df = mqstats.rates([(10.0, a, 2), (12.0, b, 2), (14.0, {**b, "received": 170.0}, 1)])
    assert list(df.columns) == mqstats.COLUMNS and len(df) == 2
    assert df.iloc[0]["received_per_s"] == 20.0 and df.iloc[0]["delivered_per_s"] == 10.0
    assert df.iloc[0]["ready"] == 1.0 and df.iloc[0]["t"] == 2.0
    assert pd.isna(df.iloc[1]["received_per_s"])  # 2 nodes, then 1: no rate


def test_the_plugin_listens_on_the_site_address_only() -> None:
    (node,) = plan_nodes([2], {2: "10.210.2.2"})
    assert isinstance(node, Node)
    conf = render_conf(node, prometheus=True)
    assert "prometheus.tcp.ip = 10.210.2.2" in conf and "prometheus.tcp.port = 15692" in conf
    assert "prometheus" not in render_conf(node)
    second = plan_nodes([2, 2], {2: "10.210.2.2"})[1]  # two nodes in one site: ports apart
    assert "prometheus.tcp.port = 15693" in render_conf(second, prometheus=True)
