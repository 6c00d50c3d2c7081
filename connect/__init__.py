"""Kafka Connect's model on PySpark: connectors run as Structured Streaming queries by a worker
with Kafka Connect's REST API, configs, converters, transforms and error handling, keeping its
configs, statuses and source offsets in the broker."""


def __getattr__(name: str):
    """``from connect import Worker`` without importing Spark for the pure modules."""
    if name == "Worker":
        from connect.worker import Worker
        return Worker
    raise AttributeError(f"module 'connect' has no attribute {name!r}")
