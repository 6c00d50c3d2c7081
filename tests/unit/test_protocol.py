"""Wire enumerations named once (``broker.protocol``)."""
from __future__ import annotations

import pytest

from broker.proto import riverlog_pb2 as pb
from broker.protocol import CoordinatorType

pytestmark = pytest.mark.unit


def test_coordinator_types_are_kafkas_find_coordinator_key_types():
    assert (CoordinatorType.GROUP, CoordinatorType.TRANSACTION) == (0, 1)
    request = pb.FindCoordinatorRequest(group_id="billing-app-1", key_type=CoordinatorType.TRANSACTION)
    assert CoordinatorType(request.key_type) is CoordinatorType.TRANSACTION
    assert CoordinatorType(pb.FindCoordinatorRequest(group_id="g").key_type) is CoordinatorType.GROUP
