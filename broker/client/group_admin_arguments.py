"""What ``AdminClient``'s group calls accept, checked before anything is sent, as confluent-kafka's
``_check_list_consumer_group_offsets_request`` and ``_check_alter_consumer_group_offsets_request``
check it (same exception types and messages)."""
from __future__ import annotations

from broker.client.message import OFFSET_INVALID, TopicPartition


def _check_requests(requests) -> None:
    if requests is None:
        raise TypeError("request cannot be None")
    if not isinstance(requests, list):
        raise TypeError("request must be a list")


def _check_group(req) -> None:
    from broker.client.group_admin import ConsumerGroupTopicPartitions   # defined there, after this module
    if not isinstance(req, ConsumerGroupTopicPartitions):
        raise TypeError("Expected list of 'ConsumerGroupTopicPartitions'")
    if req.group_id is None:
        raise TypeError("'group_id' cannot be None")
    if not isinstance(req.group_id, str):
        raise TypeError("'group_id' must be a string")
    if not req.group_id:
        raise ValueError("'group_id' cannot be empty")


def _check_partition(tp) -> None:
    if tp is None:
        raise ValueError("Element of 'topic_partitions' cannot be None")
    if not isinstance(tp, TopicPartition):
        raise TypeError("Element of 'topic_partitions' must be of type TopicPartition")
    if tp.topic is None:
        raise TypeError("Element of 'topic_partitions' must not have 'topic' attribute as None")
    if not tp.topic:
        raise ValueError("Element of 'topic_partitions' must not have 'topic' attribute as Empty")


def _check_alter_request(requests) -> None:
    """confluent-kafka's ``_check_alter_consumer_group_offsets_request``, per group: an offset to
    set must be given and not negative (a negative one would be stored and make the group stall or
    skip), so a bad request fails at the call, before anything is sent."""
    _check_requests(requests)
    for req in requests:
        _check_group(req)
        if req.topic_partitions is None:
            raise ValueError("'topic_partitions' cannot be null")
        if not isinstance(req.topic_partitions, list):
            raise TypeError("'topic_partitions' must be a list")
        if len(req.topic_partitions) == 0:
            raise ValueError("'topic_partitions' cannot be empty")
        for tp in req.topic_partitions:
            _check_partition(tp)
            if tp.partition < 0:
                raise ValueError("Element of 'topic_partitions' must not have negative value for 'partition' field")
            if tp.offset < 0:
                raise ValueError("Element of 'topic_partitions' must not have negative value for 'offset' field")


def _check_list_request(requests) -> None:
    """confluent-kafka's ``_check_list_consumer_group_offsets_request``, per group (several groups
    are Riverlog's own): ``topic_partitions`` None asks for every partition, so an empty list is
    a ValueError rather than read as "all"; the partitions carry no offset."""
    _check_requests(requests)
    for req in requests:
        _check_group(req)
        if req.topic_partitions is None:
            continue
        if not isinstance(req.topic_partitions, list):
            raise TypeError("'topic_partitions' must be a list or None")
        if not req.topic_partitions:
            raise ValueError("'topic_partitions' cannot be empty")
        for tp in req.topic_partitions:
            _check_partition(tp)
            if tp.partition < 0:
                raise ValueError("Element of 'topic_partitions' must not have negative 'partition' value")
            if tp.offset != OFFSET_INVALID:
                raise ValueError("Element of 'topic_partitions' must not have 'offset' value")


def _check_group_ids(group_ids, action: str) -> list[str]:
    """confluent-kafka's check of ``describe_consumer_groups``/``delete_consumer_groups``' argument:
    a list of group ids (a bare str is a TypeError, not one group per character)."""
    if not isinstance(group_ids, (list, tuple)):
        raise TypeError(f"Expected input to be list of group ids to be {action}")
    for group_id in group_ids:
        if not isinstance(group_id, str):
            raise ValueError(f"Expected list of group id strings, not {type(group_id).__name__}")
    return list(group_ids)


def _check_filter(values, kind: type, name: str) -> set:
    """``list_consumer_groups``' ``states``/``types``: members of ``kind`` (confluent-kafka's
    TypeError otherwise), so a str (or a state's name) is refused rather than matching no group.
    Any collection is taken where confluent-kafka takes only a set; None or empty: no filter."""
    if values is None:
        return set()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"'{name}' must be a set")
    values = set(values)
    if not all(isinstance(v, kind) for v in values):
        raise TypeError(f"All elements of {name} must be of type {kind.__name__}")
    return values
