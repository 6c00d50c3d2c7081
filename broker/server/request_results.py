"""A request's per-item results: one failed item is its own ``error_code`` and message, so the
rest of the request still succeeds (Kafka's per-partition and per-resource error fields)."""
from __future__ import annotations

import logging

from broker.errors import RiverlogError, UnknownServerError

log = logging.getLogger(__name__)


def duplicates(names) -> list:
    """The names that occur more than once, in order of first occurrence (Kafka's ControllerApis
    answers each ``INVALID_REQUEST`` "Duplicate topic name." and acts on none of them)."""
    seen, dup = set(), {}
    for name in names:
        if name in seen:
            dup[name] = None
        seen.add(name)
    return list(dup)


def fill_error(result, error: Exception) -> None:
    if not isinstance(error, RiverlogError):
        log.exception("unexpected error while handling a request", exc_info=error)
        error = UnknownServerError(f"{type(error).__name__}: {error}")
    result.error_code = error.code
    result.error_message = error.message
