"""Streams' errors, under Kafka Streams' names, on the broker's typed errors (their codes are the
codes of the base they extend: a bad topology is a configuration error)."""
from __future__ import annotations

from broker.errors import InvalidConfigError, InvalidRequestError, RiverlogError


class TopologyError(InvalidConfigError):
    """Kafka's ``TopologyException``: the topology or an operation's argument is invalid; raised
    when the definition is made or at ``build()``, never while records flow."""


class StreamsError(RiverlogError):
    """Kafka's ``StreamsException``: processing failed; the message says what to do."""


class InvalidStateStoreError(InvalidRequestError):
    """Kafka's ``InvalidStateStoreException``: the store is unknown or not queryable now."""
