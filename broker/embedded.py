"""A single-node broker inside this Python process, for notebooks, demos and experiments.

This is the public way to start a broker from code outside ``broker``: the server package is the
broker's inside, which the layer map (docs/architecture.md) keeps every other package out of.

    from broker.embedded import EmbeddedBroker
    with EmbeddedBroker() as broker:              # a temporary data directory and a free port
        servers = broker.bootstrap_servers        # "127.0.0.1:<port>", for any client's bootstrap.servers

``EmbeddedBroker(data_dir=None, port=0, config=None)`` takes any broker setting by Kafka name in
``config``; ``stop()`` (or leaving the ``with`` block) shuts it down and removes a temporary
directory.
"""
from __future__ import annotations

from broker.server.service import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
