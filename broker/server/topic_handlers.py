"""Topic admin requests (Kafka's CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders):
each asks the controller for a change to the metadata log and reports per topic, so one bad name
fails only its own result; a name given twice in one request is refused as Kafka refuses it
("Duplicate topic name."), the rest proceed.
"""
from __future__ import annotations

from broker.controller.quorum_controller import colliding_topic
from broker.errors import InvalidRequestError, InvalidTopicError
from broker.proto import riverlog_pb2 as pb
from broker.server.broker import Broker
from broker.server.request_results import duplicates, fill_error


def create_topics(broker: Broker, request: pb.CreateTopicsRequest) -> pb.CreateTopicsResponse:
    """Each topic in turn, so a name colliding ('.' versus '_') with one created earlier in the
    same request is refused as it would be in a later request; with ``validate_only`` nothing is
    created, so the names validated so far stand in for them."""
    response = pb.CreateTopicsResponse()
    repeated = duplicates(t.name for t in request.topics)
    validated: set[str] = set()
    for t in request.topics:
        if t.name in repeated:
            continue
        result = response.results.add(name=t.name)
        try:
            colliding = colliding_topic(validated, t.name)
            if colliding is not None:
                raise InvalidTopicError(f"Topic '{t.name}' collides with existing topic: {colliding}")
            broker.create_topic(t.name, t.num_partitions, t.replication_factor, dict(t.configs),
                                request.validate_only, assignment=[list(a.broker_ids) for a in t.assignments])
            if request.validate_only:
                validated.add(t.name)
        except Exception as e:  # noqa: BLE001 - reported per topic
            fill_error(result, e)
    _add_duplicates(response.results, repeated)
    return response


def delete_topics(broker: Broker, request: pb.DeleteTopicsRequest) -> pb.DeleteTopicsResponse:
    response = pb.DeleteTopicsResponse()
    repeated = duplicates(request.topics)
    for name in request.topics:
        if name in repeated:
            continue
        result = response.results.add(name=name)
        try:
            broker.delete_topic(name)
        except Exception as e:  # noqa: BLE001
            fill_error(result, e)
    _add_duplicates(response.results, repeated)
    return response


def create_partitions(broker: Broker, request: pb.CreatePartitionsRequest) -> pb.CreatePartitionsResponse:
    response = pb.CreatePartitionsResponse()
    repeated = duplicates(t.name for t in request.topics)
    for t in request.topics:
        if t.name in repeated:
            continue
        result = response.results.add(name=t.name)
        try:
            broker.create_partitions(t.name, t.count, request.validate_only,
                                     assignment=[list(a.broker_ids) for a in t.assignments])
        except Exception as e:  # noqa: BLE001
            fill_error(result, e)
    _add_duplicates(response.results, repeated)
    return response


def elect_leaders(broker: Broker, request: pb.ElectLeadersRequest) -> pb.ElectLeadersResponse:
    """Per partition (``errors``, ``elected``); the response's own error is the topic's, or the
    first partition's when none was elected (what ``elect_leaders(topic, partitions)`` reports)."""
    response = pb.ElectLeadersResponse()
    try:
        reply = broker.elect_leaders(request.topic, list(request.partitions) or None, request.election_type == 1)
        response.elected.extend(reply["elected"])
        for partition, code, message in reply["errors"]:
            response.errors.add(partition=partition, error_code=code, error_message=message)
        if reply["errors"] and not reply["elected"]:
            response.error_code, response.error_message = reply["errors"][0][1], reply["errors"][0][2]
    except Exception as e:  # noqa: BLE001
        fill_error(response, e)
    return response


def _add_duplicates(results, names) -> None:
    for name in names:
        fill_error(results.add(name=name), InvalidRequestError("Duplicate topic name."))
