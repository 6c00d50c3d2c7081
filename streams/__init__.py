"""Kafka Streams' programming model on PySpark: a topology built with the DSL runs as Structured
Streaming queries over Riverlog topics, or in plain Python under :mod:`streams.testing`."""
