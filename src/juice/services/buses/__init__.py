"""The message buses Juice deploys (RabbitMQ, clustered or federated; NATS) and the broker's own
rates and queue depths read back over a run."""
