"""Enumerations of the wire protocol that both sides name: kept here, free of gRPC and of the
generated protobuf modules, so the server, the client and pure coordinator code share one spelling.

    pb.FindCoordinatorRequest(group_id="billing-app-1", key_type=CoordinatorType.TRANSACTION)
"""
from __future__ import annotations

import enum


class CoordinatorType(enum.IntEnum):
    """``FindCoordinatorRequest.key_type``: what the key names (Kafka's ``CoordinatorType``)."""

    GROUP = 0        # a consumer group id: the leader of its __consumer_offsets partition
    TRANSACTION = 1  # a transactional.id: the leader of its __transaction_state partition
