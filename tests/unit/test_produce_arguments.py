"""produce()'s explicit partition, checked against cached metadata as librdkafka's
``rd_kafka_msg_partitioner`` checks it: a partition the topic does not have is _UNKNOWN_PARTITION
at produce() once the topic's metadata is known, else on delivery."""
import pytest

from broker.client import KafkaError
from broker.client.cluster import TopicInfo
from broker.client.produce_arguments import check_partition
from broker.errors import UnknownPartitionError

pytestmark = pytest.mark.unit

TOPICS = {"orders": TopicInfo("orders", "id", {0: None, 1: None, 2: None})}


@pytest.mark.parametrize("partition", [3, 7, 2**31 - 1, -2, -2**31])
def test_a_partition_the_known_topic_lacks_is_refused_at_produce(partition):
    with pytest.raises(UnknownPartitionError) as raised:
        check_partition(TOPICS, "orders", partition)
    assert KafkaError.of(raised.value).code() == KafkaError._UNKNOWN_PARTITION
    assert f"partition {partition} does not exist" in str(raised.value) and "3 partition(s)" in str(raised.value)


@pytest.mark.parametrize("partition", [-1, 0, 2])
def test_a_partition_the_topic_has_and_the_partitioners_minus_one_pass(partition):
    assert check_partition(TOPICS, "orders", partition) is None


@pytest.mark.parametrize("partition", [3, -2])
def test_an_unknown_topics_partition_waits_for_its_delivery_report(partition):
    assert check_partition(TOPICS, "payments", partition) is None


@pytest.mark.parametrize("partition, message", [(2**31, "greater than maximum"), (-2**31 - 1, "less than minimum")])
def test_a_partition_outside_int32_overflows_as_confluent_kafkas_argument_parsing(partition, message):
    with pytest.raises(OverflowError, match=message):
        check_partition({}, "orders", partition)
