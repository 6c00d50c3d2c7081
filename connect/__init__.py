"""Kafka Connect's model on PySpark: connectors run as Structured Streaming queries by a worker
with Kafka Connect's REST API, configs, converters, transforms and error handling, keeping its
configs, statuses and source offsets in the broker."""
