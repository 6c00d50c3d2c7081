"""Enumerations of the wire protocol that both sides name: kept here, free of gRPC and of the
generated protobuf modules, so the server, the client and pure coordinator code share one spelling
(coordinator types, and the assignors a ``partition.assignment.strategy`` may name).

    pb.FindCoordinatorRequest(group_id="billing-app-1", key_type=CoordinatorType.TRANSACTION)
"""
from __future__ import annotations

import enum


class CoordinatorType(enum.IntEnum):
    """``FindCoordinatorRequest.key_type``: what the key names (Kafka's ``CoordinatorType``)."""

    GROUP = 0        # a consumer group id: the leader of its __consumer_offsets partition
    TRANSACTION = 1  # a transactional.id: the leader of its __transaction_state partition


EAGER_ASSIGNORS = ("range", "roundrobin")
COOPERATIVE_ASSIGNORS = ("cooperative-sticky",)


def assignment_strategies(value: str) -> tuple[list[str], str | None]:
    """A ``partition.assignment.strategy`` list in its order of preference (empty: ``range``), and
    why it is refused, if it is: every entry must name an assignor, and all must share one rebalance
    protocol (librdkafka refuses a list mixing eager and cooperative assignors: "online migration
    between assignors with different protocol types is not supported")."""
    names = list(dict.fromkeys(n.strip().lower() for n in (value or "").split(",") if n.strip())) or ["range"]
    known = EAGER_ASSIGNORS + COOPERATIVE_ASSIGNORS
    unknown = [n for n in names if n not in known]
    if unknown:
        return names, (f"unknown partition.assignment.strategy {unknown[0]!r} in {value!r}; "
                       f"use one or more of {', '.join(sorted(known))}")
    if len({n in COOPERATIVE_ASSIGNORS for n in names}) > 1:
        return names, (f"partition.assignment.strategy {value!r} mixes eager and cooperative assignors: all must "
                       "have the same protocol type (online migration between them is not supported)")
    return names, None
