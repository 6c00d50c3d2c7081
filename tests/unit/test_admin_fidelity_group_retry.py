"""The admin client's group calls retry coordinator errors that come in an answer's body, as Java's
admin handlers do (``DescribeConsumerGroupsHandler.handleError``): loading retries the same broker,
a moved or unavailable coordinator is found again. They used to reach the caller at once."""
from __future__ import annotations

from concurrent.futures import Future

import pytest

from broker.client.group_admin import ConsumerGroupAdmin, ConsumerGroupTopicPartitions
from broker.client.message import TopicPartition
from broker.client.model import ConsumerGroupState
from broker.errors import CoordinatorLoadInProgressError, NotCoordinatorError
from broker.proto import riverlog_pb2 as pb

LOADING, NOT_COORDINATOR = CoordinatorLoadInProgressError.code, NotCoordinatorError.code


class FakeCoordinator:
    """Answers each call with the next of ``answers`` (the last one again once they run out)."""

    def __init__(self, answers):
        self.answers, self.calls, self.forgotten = list(answers), [], 0

    def call(self, method, request, timeout=None):
        self.calls.append(method)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def forget(self):
        self.forgotten += 1


class FakeCluster:
    timeout, backoff = 2.0, 0.001
    brokers = {1: "127.0.0.1:9092"}   # node id -> address, as ClusterClient's


class Admin(ConsumerGroupAdmin):
    def __init__(self, coordinator):
        self.cluster, self.coordinator = FakeCluster(), coordinator

    def _coordinator(self, group_id):
        return self.coordinator

    def _fan_out(self, keys, call, split):
        futures = {k: Future() for k in keys}
        for key, outcome in split(call()):
            (futures[key].set_exception if isinstance(outcome, Exception) else futures[key].set_result)(outcome)
        return futures


def _described(error_code=0):
    return pb.DescribeGroupsResponse(groups=[pb.GroupDescription(
        group_id="g", state="Empty" if not error_code else "", assignor="range", coordinator=1,
        error_code=error_code, error_message="loading" if error_code else "")])


def test_describe_retries_a_loading_coordinator_then_answers():
    coordinator = FakeCoordinator([_described(LOADING), _described(LOADING), _described()])
    d = Admin(coordinator).describe_consumer_groups(["g"])["g"].result(1)
    assert d.state == ConsumerGroupState.EMPTY and (d.coordinator.id, d.coordinator.port) == (1, 9092)
    assert coordinator.calls == ["DescribeGroups"] * 3 and coordinator.forgotten == 0


def test_a_moved_coordinator_is_found_again_for_delete_and_alter():
    delete_answers = [pb.DeleteGroupsResponse(), pb.DeleteGroupsResponse()]
    delete_answers[0].results.add(group_id="g", error_code=NOT_COORDINATOR, error_message="moved")
    delete_answers[1].results.add(group_id="g")
    coordinator = FakeCoordinator(delete_answers)
    assert Admin(coordinator).delete_consumer_groups(["g"])["g"].result(1) is None
    assert coordinator.forgotten == 1 and len(coordinator.calls) == 2

    commit_answers = [pb.OffsetCommitResponse(), pb.OffsetCommitResponse()]
    commit_answers[0].results.add(topic="t", partition=0, error_code=NOT_COORDINATOR, error_message="moved")
    commit_answers[1].results.add(topic="t", partition=0)
    coordinator = FakeCoordinator(commit_answers)
    done = Admin(coordinator).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("g", [TopicPartition("t", 0, 5)])])["g"].result(1)
    assert done.topic_partitions[0].offset == 5 and coordinator.forgotten == 1


def test_a_coordinator_still_loading_at_the_deadline_is_the_answer():
    coordinator = FakeCoordinator([_described(LOADING)])
    admin = Admin(coordinator)
    admin.cluster.timeout = 0.05
    with pytest.raises(CoordinatorLoadInProgressError):
        admin.describe_consumer_groups(["g"])["g"].result(1)
    assert len(coordinator.calls) > 1
