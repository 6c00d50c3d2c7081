"""The group result classes take confluent-kafka's positional arguments (``confluent_kafka/admin/
_group.py``), so code that builds them, as ported tests do to stand in for a broker, means the same."""
from __future__ import annotations

from broker.client.admin import (ConsumerGroupDescription, ConsumerGroupListing, ConsumerGroupState,
                                 ConsumerGroupType, MemberAssignment, MemberDescription, Node, TopicPartition)


def test_listing_takes_confluents_order():
    listing = ConsumerGroupListing("g", True, ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC)
    assert (listing.state, listing.type) == (ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC)


def test_member_and_group_descriptions_take_confluents_order():
    target = MemberAssignment([TopicPartition("orders", 1)])
    member = MemberDescription("m-1", "client", "/10.0.0.1", MemberAssignment([]), "pod-1", target)
    assert (member.group_instance_id, member.target_assignment) == ("pod-1", target)
    assert MemberDescription("m-2", "client", "/10.0.0.2", MemberAssignment([])).target_assignment is None
    node = Node(1, "127.0.0.1", 9092)
    desc = ConsumerGroupDescription("g", False, [member], "range", ConsumerGroupState.STABLE, node, None,
                                    ConsumerGroupType.CONSUMER)
    assert (desc.coordinator, desc.authorized_operations, desc.type) == (node, None, ConsumerGroupType.CONSUMER)


def test_list_consumer_groups_refuses_filters_that_are_not_states_or_types():
    """confluent-kafka's list_consumer_groups: ``states``/``types`` hold ConsumerGroupState /
    ConsumerGroupType (TypeError otherwise). A str was read as its characters, a state's name
    matched nothing: both listed no group at all, silently."""
    import pytest

    from broker.client.admin import AdminClient
    with AdminClient({"bootstrap.servers": "127.0.0.1:1"}) as admin:
        for kwargs, message in (({"states": "Stable"}, "'states' must be a set"),
                                ({"states": {"Stable"}}, "All elements of states must be of type ConsumerGroupState"),
                                ({"types": {"consumer"}}, "All elements of types must be of type ConsumerGroupType")):
            with pytest.raises(TypeError, match=message):
                admin.list_consumer_groups(**kwargs)
