"""Connect's errors, under Kafka Connect's names, on the broker's typed errors."""
from __future__ import annotations

from broker.errors import InvalidConfigError, RiverlogError


class ConnectError(RiverlogError):
    """Kafka's ``ConnectException``: a connector, converter or transform failed; the message says
    which record and what to do."""


class ConfigError(InvalidConfigError):
    """Kafka's ``ConfigException``: a connector config is invalid. ``details["errors"]`` maps each
    field to its problems, as Connect's validate endpoint lists them."""


class DataError(ConnectError):
    """Kafka's ``DataException``: a record cannot be converted or transformed."""
