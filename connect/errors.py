"""Connect's errors, under Kafka Connect's names, on the broker's typed errors."""
from __future__ import annotations

from broker.errors import InvalidConfigError, RetriableError, RiverlogError


class ConnectError(RiverlogError):
    """Kafka's ``ConnectException``: a connector, converter or transform failed; the message says
    which record and what to do."""


class ConfigError(InvalidConfigError):
    """Kafka's ``ConfigException``: a connector config is invalid. ``details["errors"]`` maps each
    field to its problems, as Connect's validate endpoint lists them."""


class DataError(ConnectError):
    """Kafka's ``DataException``: a record cannot be converted or transformed."""


class RestError(ConnectError):
    """An error the REST API answers with Kafka Connect's status code and
    ``{"error_code": <http status>, "message": ...}`` body. Raised by the worker, not only the API,
    so Python callers see the same outcome as HTTP ones."""
    http_status: int = 500
    _category = True


class NotFoundError(RestError):
    """Kafka's ``NotFoundException`` (404): no connector, task or plugin by that name."""
    code, name, retriable, grpc_status = 1301, "CONNECT_NOT_FOUND", False, "NOT_FOUND"
    http_status = 404


class AlreadyExistsError(RestError):
    """Kafka's ``AlreadyExistsException`` (409): ``POST /connectors`` with a name already in use;
    use ``PUT /connectors/{name}/config`` to change it."""
    code, name, retriable, grpc_status = 1302, "CONNECT_ALREADY_EXISTS", False, "ALREADY_EXISTS"
    http_status = 409


class BadRequestError(RestError):
    """Kafka's ``BadRequestException`` (400): a request the worker cannot act on as sent, e.g.
    offsets altered while the connector is not STOPPED (stop it first)."""
    code, name, retriable, grpc_status = 1303, "CONNECT_BAD_REQUEST", False, "INVALID_ARGUMENT"
    http_status = 400


class ConflictError(RestError):
    """HTTP 409 for a request that conflicts with the connector's current state (Kafka answers
    409 while a rebalance is in progress); retry once the state has settled."""
    code, name, retriable, grpc_status = 1304, "CONNECT_CONFLICT", False, "FAILED_PRECONDITION"
    http_status = 409


class WorkerGroupInUseError(ConnectError, RetriableError):
    """Another live worker holds the worker's ``group.id``. Kafka Connect's distributed workers
    share a group (``WorkerCoordinator``) and split its connectors; Riverlog's worker runs all of
    them, so a second worker of the group would run every connector a second time. Retriable:
    the group is free once that worker stops (or, killed, once its ``session.timeout.ms`` passed)."""
    code, name, retriable, grpc_status = 1305, "CONNECT_WORKER_GROUP_IN_USE", True, "UNAVAILABLE"
