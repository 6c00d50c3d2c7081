"""Streams' errors, under Kafka Streams' names, on the broker's typed errors (their codes are the
codes of the base they extend: a bad topology is a configuration error)."""
from __future__ import annotations

import logging

from broker.errors import InvalidConfigError, InvalidRequestError, RiverlogError


class TopologyError(InvalidConfigError):
    """Kafka's ``TopologyException``: the topology or an operation's argument is invalid; raised
    when the definition is made or at ``build()``, never while records flow."""


class StreamsError(RiverlogError):
    """Kafka's ``StreamsException``: processing failed; the message says what to do."""


class InvalidStateStoreError(InvalidRequestError):
    """Kafka's ``InvalidStateStoreException``: the store is unknown or not queryable now."""


# ---------------------------------------------------------------------------------------------
# Exception handlers (Kafka's org.apache.kafka.streams.errors), chosen by class name in the
# config. Riverlog runs Kafka's own handlers; a class it does not have is refused at
# construction (InvalidConfigError) rather than silently replaced.

log = logging.getLogger("streams.errors")

DESERIALIZATION_HANDLER = "deserialization.exception.handler"
DEFAULT_DESERIALIZATION_HANDLER = "default.deserialization.exception.handler"
PROCESSING_HANDLER = "processing.exception.handler"
PRODUCTION_HANDLER = "production.exception.handler"
DEFAULT_PRODUCTION_HANDLER = "default.production.exception.handler"


class LogAndFailExceptionHandler:
    """Kafka's default deserialization handler: log, then fail the task."""
    CONTINUE = False

    def handle(self, task, topic: str, partition: int, offset: int, exception: Exception) -> bool:
        log.error("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %s, offset: %s",
                  task, topic, partition, offset, exc_info=exception)
        return self.CONTINUE


class LogAndContinueExceptionHandler(LogAndFailExceptionHandler):
    """Log and skip the record; the task goes on and commits its offset past it."""
    CONTINUE = True

    def handle(self, task, topic, partition, offset, exception) -> bool:
        log.warning("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %s, offset: %s",
                    task, topic, partition, offset, exc_info=exception)
        return self.CONTINUE


class LogAndFailProcessingExceptionHandler:
    """KIP-1033's default: an exception a processor raises fails the task."""
    CONTINUE = False

    def handle(self, node: str, task, source: tuple, exception: Exception) -> bool:
        log.error("Exception caught during message processing, processor node: %s, taskId: %s, source topic: %s, "
                  "source partition: %s, source offset: %s", node, task, *source, exc_info=exception)
        return self.CONTINUE


class LogAndContinueProcessingExceptionHandler(LogAndFailProcessingExceptionHandler):
    """Log and drop the record at the processor that raised; the task goes on."""
    CONTINUE = True

    def handle(self, node, task, source, exception) -> bool:
        log.warning("Exception caught during message processing, processor node: %s, taskId: %s, source topic: %s, "
                    "source partition: %s, source offset: %s", node, task, *source, exc_info=exception)
        return self.CONTINUE


class DefaultProductionExceptionHandler:
    """Kafka's only production handler: a record the sink cannot serialize or the broker refuses
    fails the task (the producer retries what is retriable)."""
    CONTINUE = False


def kafka_class(config: dict, name: str, classes: tuple, package: str, default):
    """An instance of the class ``config[name]`` names (Kafka's ``Type.CLASS``: the fully-qualified
    name, or here also the simple one, a class or an instance); ``default`` when unset."""
    given = config.get(name)
    if given is None:
        return default()
    by_name = {c.__name__: c for c in classes}
    if isinstance(given, type) and given in classes:
        return given()
    if isinstance(given, tuple(classes)):
        return given
    if isinstance(given, str):
        simple = given.strip()
        if simple.startswith(package + "."):
            simple = simple[len(package) + 1:]
        if simple in by_name:
            return by_name[simple]()
    raise InvalidConfigError(f"Invalid value {given!r} for configuration {name}: Class {given} could not be found; "
                             f"Riverlog runs {', '.join(f'{package}.{c}' for c in by_name)}", config=name)


def _preferred(config: dict, new: str, deprecated: str) -> str:
    """Kafka's ``StreamsConfig.deserializationExceptionHandler()``: the new name wins over the
    deprecated one (with a warning when both are set)."""
    if new in config and deprecated in config:
        log.warning("Both the deprecated and new config for %s are configured. The deprecated one will be ignored.",
                    new.replace(".", " "))
    return new if new in config else deprecated


_ERRORS = "org.apache.kafka.streams.errors"


def deserialization_handler(config: dict):
    name = _preferred(config, DESERIALIZATION_HANDLER, DEFAULT_DESERIALIZATION_HANDLER)
    return kafka_class(config, name, (LogAndFailExceptionHandler, LogAndContinueExceptionHandler), _ERRORS,
                       LogAndFailExceptionHandler)


def processing_handler(config: dict):
    return kafka_class(config, PROCESSING_HANDLER, (LogAndFailProcessingExceptionHandler,
                                                    LogAndContinueProcessingExceptionHandler), _ERRORS,
                       LogAndFailProcessingExceptionHandler)


def production_handler(config: dict):
    name = _preferred(config, PRODUCTION_HANDLER, DEFAULT_PRODUCTION_HANDLER)
    return kafka_class(config, name, (DefaultProductionExceptionHandler,), _ERRORS, DefaultProductionExceptionHandler)


# ---------------------------------------------------------------------------------------------
# The application's lifecycle (Kafka's KafkaStreams): a call in the wrong state, a store asked
# for too early or by an unknown name.

class IllegalStateError(StreamsError):
    """Kafka's ``IllegalStateException`` from ``KafkaStreams``: the call is not allowed in the
    application's current state (``start()`` twice, ``cleanUp()`` while running, a listener set
    after ``start()``); the message names the state."""
    code, name, retriable, grpc_status = 1280, "STREAMS_ILLEGAL_STATE", False, "FAILED_PRECONDITION"


class StreamsNotStartedError(InvalidStateStoreError):
    """Kafka's ``StreamsNotStartedException``: the application has not been started, so the store
    has nothing to show yet; call ``start()`` and retry."""
    code, name, retriable, grpc_status = 1281, "STREAMS_NOT_STARTED", False, "FAILED_PRECONDITION"


class UnknownStateStoreError(InvalidStateStoreError):
    """Kafka's ``UnknownStateStoreException``: no store of that name is in the topology."""
    code, name, retriable, grpc_status = 1282, "UNKNOWN_STATE_STORE", False, "NOT_FOUND"


class InvalidStateStorePartitionError(InvalidStateStoreError):
    """Kafka's ``InvalidStateStorePartitionException``: the partition asked of a store
    (``StoreQueryParameters.withPartition``) does not exist."""
    code, name, retriable, grpc_status = 1283, "INVALID_STATE_STORE_PARTITION", False, "INVALID_ARGUMENT"
