"""confluent-kafka-python's own client tests (tests/test_Producer.py, test_Consumer.py, test_Admin.py)
and librdkafka's configuration rules (CONFIGURATION.md, rd_kafka_conf_finalize), for the parts that
apply to a client over a real broker: what misuse raises, at the call, with which type and code."""
from __future__ import annotations

import concurrent.futures

import pytest

from broker.client import (AdminClient, Consumer, KafkaError, KafkaException, Message, NewPartitions, NewTopic,
                           Producer, TopicPartition)
from broker.client.admin import ConfigResource, ResourceType

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_an_idle_producer_is_truthy(shared_broker):
    """test_producer_bool_value (confluent-kafka issue #1427): ``if producer:`` with nothing queued."""
    p = Producer({"bootstrap.servers": shared_broker.bootstrap})
    try:
        assert len(p) == 0 and bool(p) is True
    finally:
        p.close()


@pytest.mark.parametrize("conf, message", [
    ({"acks": 1, "enable.idempotence": True}, "`acks` must be set to `all` when `enable.idempotence` is true"),
    ({"max.in.flight": 10, "enable.idempotence": True},
     "`max.in.flight` must be set <= 5 when `enable.idempotence` is true"),
    ({"retries": 0, "enable.idempotence": True}, "`retries` must be set >= 1 when `enable.idempotence` is true"),
    ({"transactional.id": "t", "enable.idempotence": False}, "`transactional.id` requires `enable.idempotence=true`"),
    ({"transactional.id": "t", "acks": "1"}, "`acks` must be set to `all` when `enable.idempotence` is true"),
])
def test_conflicting_idempotence_settings_are_refused_as_librdkafka(shared_broker, conf, message):
    with pytest.raises(KafkaException, match=message) as caught:
        Producer({"bootstrap.servers": shared_broker.bootstrap, **conf})
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG


def test_create_topics_checks_its_arguments_at_the_call(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        for bad, error in ((None, TypeError), ("mytopic", TypeError), (["mytopic"], ValueError),
                           ([None, NewTopic(topic_name, 1, 1)], ValueError)):
            with pytest.raises(error):
                a.create_topics(bad)
        with pytest.raises(TypeError):
            a.create_topics([NewTopic(topic_name, 3, 1)], validate_only="maybe")
        with pytest.raises(ValueError):
            a.create_topics([NewTopic(topic_name, 3, 1)], validate_only=False, request_timeout=-5)
        with pytest.raises(ValueError):
            a.create_topics([NewTopic(topic_name, 3, 1)], operation_timeout=-4.12345678)
        with pytest.raises(TypeError):
            a.create_topics([NewTopic(topic_name, 3, 1)], unknown_operation="it is")
        with pytest.raises(TypeError, match="config must be a dict"):
            NewTopic(topic_name, 3, 1, config=["fails", "because not a dict"])
        assert topic_name not in a.list_topics(timeout=30).topics   # nothing was sent
        fs = a.create_topics([NewTopic(topic_name, 2, 1)], validate_only=True, request_timeout=10)
        assert list(fs) == [topic_name] and fs[topic_name].result(30) is None


def test_delete_topics_takes_a_list_of_names_never_a_string(shared_broker, topic_name):
    """A str is a TypeError, not the list of its characters: ``delete_topics("ab")`` must not delete
    topics ``a`` and ``b``."""
    letters = [f"{topic_name}{c}" for c in "xy"]
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        for name in ["x", "y"] + letters:
            a.create_topics([NewTopic(name, 1, 1)])[name].exception(30)   # TopicAlreadyExists is fine
        with pytest.raises(TypeError):
            a.delete_topics("xy")
        with pytest.raises(TypeError):
            a.delete_topics(None)
        with pytest.raises(ValueError):
            a.delete_topics([None, letters[0]])
        with pytest.raises(TypeError):
            a.create_partitions(None)
        with pytest.raises(ValueError):
            a.create_partitions([None, NewPartitions(letters[0], 2)])
        assert {"x", "y", *letters} <= set(a.list_topics(timeout=30).topics)
        fs = a.delete_topics(letters, request_timeout=10)
        for f in concurrent.futures.as_completed(fs.values(), timeout=30):
            assert f.result() is None


def test_config_calls_check_their_resources(shared_broker, topic_name):
    with pytest.raises(ValueError):
        ConfigResource(ResourceType.TOPIC, None)
    with pytest.raises(ValueError):
        ConfigResource("doesnt exist", "hi")
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        with pytest.raises(TypeError):
            a.describe_configs("something")
        with pytest.raises(ValueError):
            a.describe_configs([None, ConfigResource(ResourceType.TOPIC, topic_name)])
        with pytest.raises(TypeError):
            a.alter_configs(None)
        with pytest.raises(ValueError):
            a.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic_name)], request_timeout=-1)


def test_a_closed_admin_client_refuses_every_call_as_confluents(shared_broker, topic_name):
    a = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    a.close()
    a.close()   # idempotent
    calls = [lambda: a.create_topics([NewTopic(topic_name, 1, 1)]), lambda: a.delete_topics([topic_name]),
             lambda: a.describe_configs([ConfigResource(ResourceType.TOPIC, topic_name)]),
             lambda: a.list_topics(timeout=5), lambda: a.list_consumer_groups(), lambda: a.describe_cluster()]
    for call in calls:
        with pytest.raises(RuntimeError, match="AdminClient has been closed"):
            call()


def test_subscribe_refuses_a_callback_that_is_not_callable(shared_broker, topic_name):
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name})
    try:
        for name in ("on_assign", "on_revoke", "on_lost"):
            with pytest.raises(TypeError, match=f"{name} expects a callable"):
                c.subscribe([topic_name], **{name: "not callable"})
        assert c.assignment() == [] and c.memberid() is None   # nothing joined
    finally:
        c.close()


def test_a_consumer_whose_init_never_ran_is_closed():
    """test_uninitialized_consumer_methods: a subclass that skips ``__init__``."""
    class UninitializedConsumer(Consumer):
        def __init__(self, config):
            pass

    consumer = UninitializedConsumer({"group.id": "test"})
    calls = [lambda: consumer.subscribe(["topic"]), consumer.unsubscribe, consumer.poll, consumer.consume,
             lambda: consumer.assign([TopicPartition("topic", 0)]), consumer.unassign, consumer.assignment,
             consumer.commit, lambda: consumer.committed([TopicPartition("topic", 0)]),
             lambda: consumer.position([TopicPartition("topic", 0)]), lambda: consumer.seek(TopicPartition("t", 0, 0)),
             lambda: consumer.get_watermark_offsets(TopicPartition("topic", 0)),
             lambda: consumer.store_offsets(offsets=[TopicPartition("topic", 0, 42)]),
             lambda: consumer.offsets_for_times([TopicPartition("topic", 0)]), consumer.consumer_group_metadata]
    for call in calls:
        with pytest.raises(RuntimeError, match="Consumer closed"):
            call()
    consumer.close()   # succeeds


def test_commit_and_store_offsets_take_a_message_the_application_built(shared_broker, topic_name):
    """test_commit_params/test_store_offsets_params: a Message made with confluent's constructor
    commits its offset + 1; what is not a Message is a TypeError; the argument rules are confluent's."""
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                  "enable.auto.commit": False, "enable.auto.offset.store": False})
    tp = TopicPartition(topic_name, 0)
    try:
        c.assign([tp])
        c.commit(message=Message(topic=topic_name, partition=0, offset=4), asynchronous=False)
        assert c.committed([tp], timeout=30)[0].offset == 5
        c.store_offsets(message=Message(topic_name, 0, 9))
        c.commit(asynchronous=False)
        assert c.committed([tp], timeout=30)[0].offset == 10
        with pytest.raises(ValueError, match="mutually exclusive"):
            c.commit(message=Message(topic_name, 0, 1), offsets=[tp])
        with pytest.raises(ValueError, match="expected either message or offsets"):
            c.store_offsets(message=None, offsets=None)
        for call in (c.commit, c.store_offsets):
            with pytest.raises(TypeError):
                call(message="not a message")
        assert c.committed([tp], timeout=30)[0].offset == 10
    finally:
        c.close()


@pytest.mark.parametrize("messages, error, match", [
    ("not_a_list", TypeError, "messages must be a list"),
    ({"not": "list"}, TypeError, "messages must be a list"),
    ([{"value": b"good"}, "not_dict", {"value": b"good2"}], TypeError, "Message at index 1 must be a dict"),
    ([{"value": b"ok"}, {"value": 123}], TypeError, "Message value at index 1 must be bytes or str"),
    ([{"value": b"good", "key": ["invalid"]}], TypeError, "Message key at index 0 must be bytes or str"),
    ([{"value": b"good", "partition": "invalid"}], TypeError, "Message partition at index 0 must be int"),
    ([{"value": b"good"}, {"value": b"x", "headers": ("a", "b")}], ValueError, "Invalid headers at index 1"),
])
def test_produce_batch_checks_every_dict_before_queueing_any(shared_broker, topic_name, messages, error, match):
    """test_produce_batch_input_validation: the first bad entry is named and nothing is queued."""
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 60_000})
    try:
        with pytest.raises(error, match=match):
            p.produce_batch(topic_name, messages)
        assert len(p) == 0
        extras = [{"value": b"normal", "key": b"normal", "callback": lambda err, msg: None, "extra_field": "ignored",
                   "_private": "user_private_field"}]
        assert p.produce_batch(topic_name, extras) == 1 and "_error" not in extras[0] and len(p) == 1
    finally:
        p.purge()
        p.close(30)


def test_a_key_deserializer_failure_leaves_the_raw_key_and_value_on_its_message(shared_broker, topic_name):
    """DeserializingConsumer.poll deserializes both before setting either: the message the error
    carries keeps the bytes as fetched (to log or dead-letter them)."""
    from broker.client import DeserializingConsumer
    from broker.client.error import KeyDeserializationError
    from broker.client.serialization import IntegerDeserializer, StringDeserializer

    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        p.produce(topic_name, key=b"not an int", value=b"plain text")
        assert p.flush(30) == 0
    c = DeserializingConsumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                               "auto.offset.reset": "earliest", "key.deserializer": IntegerDeserializer(),
                               "value.deserializer": StringDeserializer()})
    try:
        c.subscribe([topic_name])
        with pytest.raises(KeyDeserializationError) as caught:
            for _ in range(6):      # the record arrives within a minute, and raises
                c.poll(10.0)
        raw = caught.value.kafka_message
        assert (raw.key(), raw.value(), raw.offset()) == (b"not an int", b"plain text", 0)
    finally:
        c.close()


def test_every_method_of_a_closed_producer_raises_as_confluents(shared_broker, topic_name):
    """test_producer_context_manager_after_exit: produce_batch, purge and the transaction calls too
    (not only produce/poll/flush), and ``len()`` is 0."""
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": topic_name}) as p:
        pass
    calls = [lambda: p.produce_batch(topic_name, [{"value": b"test"}]), p.purge, p.init_transactions,
             p.begin_transaction, lambda: p.commit_transaction(1), lambda: p.abort_transaction(1),
             lambda: p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 1)], None)]
    for call in calls:
        with pytest.raises(RuntimeError, match="Producer has been closed"):
            call()
    assert len(p) == 0 and p.__enter__() is p and p.__exit__(None, None, None) is None


def test_a_producer_whose_init_never_ran_is_closed():
    """test_uninitialized_producer_methods (confluent-kafka issue #1590)."""
    class UninitializedProducer(Producer):
        def __init__(self, config):
            pass

    producer = UninitializedProducer({})
    calls = [lambda: producer.produce("topic", value=b"test"), producer.poll, producer.flush, producer.purge,
             lambda: producer.produce_batch("topic", [{"value": b"test"}]), producer.init_transactions,
             producer.begin_transaction, producer.commit_transaction, producer.abort_transaction]
    for call in calls:
        with pytest.raises(RuntimeError, match="Producer has been closed"):
            call()
    assert len(producer) == 0 and producer.close() == 0
    with pytest.raises(AttributeError):
        producer.no_such_attribute  # noqa: B018 - the lookup is what is tested


def test_group_calls_take_a_list_of_group_ids_never_a_string(shared_broker, topic_name):
    """describe/delete_consumer_groups("billing") is a TypeError, not seven groups "b", "i", ..."""
    from broker.client.admin import ConsumerGroupTopicPartitions

    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        for call in (a.describe_consumer_groups, a.delete_consumer_groups):
            with pytest.raises(TypeError, match="Expected input to be list of group ids"):
                call(topic_name)
            with pytest.raises(ValueError):
                call([None])
        with pytest.raises(TypeError):
            a.list_consumer_group_offsets(ConsumerGroupTopicPartitions(topic_name))
        assert list(a.describe_consumer_groups([topic_name])) == [topic_name]


def test_a_timed_out_record_reports_librdkafkas_message(topic_name):
    """test_dr_msg_errstr: no broker answers, so the record runs out of message.timeout.ms; its
    report is _MSG_TIMED_OUT and says "Message timed out", whatever the payload."""
    reports = []
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 300,
                  "on_delivery": lambda err, msg: reports.append((err, msg))})
    try:
        p.produce(topic_name, "This is the message payload")
        p.produce(topic_name, "\xc2\xc2")
        assert p.flush(60) == 0
    finally:
        p.close(5)
    assert [err.code() for err, _ in reports] == [KafkaError._MSG_TIMED_OUT] * 2
    assert all("Message timed out" in err.str() for err, _ in reports)
    assert [msg.value() for _, msg in reports] == [b"This is the message payload", "\xc2\xc2".encode()]


def test_a_raising_delivery_callback_loses_no_other_report(shared_broker, topic_name):
    """test_threads/test_delivery_callback_exception...: the callback's exception leaves flush(); the
    reports after it are served by the next poll()/flush(), and len() counts them until then."""
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    seen = []

    def crash(err, msg):
        raise RuntimeError("Intentional callback crash")

    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 50})
    try:
        p.produce(topic_name, b"0", partition=0, on_delivery=crash)
        for v in (b"1", b"2"):
            p.produce(topic_name, v, partition=0, on_delivery=lambda err, msg: seen.append((err, msg.value())))
        with pytest.raises(RuntimeError, match="Intentional callback crash"):
            p.flush(30)
        assert p.flush(30) == 0 and len(p) == 0
        assert seen == [(None, b"1"), (None, b"2")]
    finally:
        p.close(30)


def test_list_offsets_and_delete_records_check_their_requests(shared_broker, topic_name):
    """test_list_offsets_api/test_delete_records: refused at the call, nothing sent."""
    from broker.client.admin import IsolationLevel, OffsetSpec

    tp = TopicPartition(topic_name, 0, 10)
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        for kwargs in ({"isolation_level": 10}, {"request_timeout": "test"}):
            with pytest.raises(TypeError):
                a.list_offsets({tp: OffsetSpec.earliest()}, **kwargs)
        with pytest.raises(ValueError):
            a.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=-1)
        for bad, error in ((None, TypeError), ({TopicPartition("", 0, 10): OffsetSpec.earliest()}, ValueError),
                           ({TopicPartition("correct", -1, 10): OffsetSpec.earliest()}, ValueError),
                           ({"not-topic-partition": OffsetSpec.latest()}, TypeError), ({None: OffsetSpec.latest()},
                                                                                       TypeError),
                           ({tp: "test"}, TypeError), ({tp: None}, TypeError)):
            with pytest.raises(error):
                a.list_offsets(bad, isolation_level=IsolationLevel.READ_COMMITTED)
        assert a.list_offsets({}) == {}
        with pytest.raises(TypeError, match="Expected Request to be a list, got 'NoneType'"):
            a.delete_records(None)
        with pytest.raises(TypeError, match="Expected Request to be a list, got 'int'"):
            a.delete_records(1)
        with pytest.raises(TypeError, match="Element of the request list must be of type 'TopicPartition' got 'str'"):
            a.delete_records(["test-1"])
        for bad in ([TopicPartition("")], [TopicPartition(topic_name)], {TopicPartition(topic_name, -1): 5}):
            with pytest.raises(ValueError):
                a.delete_records(bad)
