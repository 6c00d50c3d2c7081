"""Where the sink's driver records its commit decisions: the client's decision log
(:class:`broker.client.exactly_once.DecisionLog`), in the compacted topic ``riverlog-sink-commits``."""
from __future__ import annotations

from broker.client.exactly_once import DECISIONS_TOPIC as TOPIC
from broker.client.exactly_once import DecisionLog as CommitLog

__all__ = ["TOPIC", "CommitLog"]
