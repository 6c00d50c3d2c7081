"""How the consumer's heartbeat (broker/client/membership.py) takes an error other than the
coordinator moving or the member being fenced: Kafka's ``AbstractHeartbeatRequestManager
.onErrorResponse`` sends every error it does not list (UNKNOWN_SERVER_ERROR among them) to
``handleFatalFailure``, and librdkafka's ``rd_kafka_cgrp_handle_ConsumerGroupHeartbeat`` makes a
permanent error fatal (GROUP_ID_NOT_FOUND too); both retry what is retriable. Driven against the
real coordinator in-process, as tests/unit/test_client_membership.py does."""
from __future__ import annotations

import pytest

from broker.errors import (BrokerNotAvailableError, GroupIdNotFoundError, KafkaTimeoutError, NetworkError,
                           RequestTimedOutError, UnknownServerError)
from tests.unit.test_client_membership import _joined, _wait
from tests.unit.test_client_membership import app, coordinator  # noqa: F401 - fixtures

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("error", [UnknownServerError("RuntimeError while handling ConsumerGroupHeartbeat"),
                                   GroupIdNotFoundError("group 'g' does not exist")])
def test_an_error_that_is_not_retriable_is_fatal_raised_from_poll(coordinator, app, error):  # noqa: F811
    a = app()
    _joined(a)
    membership = a._membership
    coordinator.errors.append(error)
    with pytest.raises(type(error)):
        a.poll_until(lambda: False, timeout=5.0)
    assert a.calls == [("lost", [("t", 0), ("t", 1)])]
    _wait(lambda: not membership._thread.is_alive())   # it stopped heartbeating


@pytest.mark.parametrize("error", [NetworkError, KafkaTimeoutError, BrokerNotAvailableError, RequestTimedOutError])
def test_a_retriable_error_is_retried_keeping_the_assignment(coordinator, app, error):  # noqa: F811
    """guard (already matched): a broken connection, a timeout or a broker still starting is
    retried, and the member keeps its partitions and epoch."""
    a = app()
    _joined(a)
    before = a._membership.metadata()
    asked = len(coordinator.requests)
    coordinator.errors.extend([error("down"), error("down again")])
    _wait(lambda: len(coordinator.requests) >= asked + 3)
    for _ in range(3):
        a._group_step()
    assert a.calls == [] and a._owned == {("t", 0), ("t", 1)}
    assert a._membership.metadata() == before and a._membership.fatal is None
