"""What a delivery callback receives (confluent-kafka's ``on_delivery(err, msg)``), built from a
settled batch without a broker."""
import pytest

from broker.client import KafkaError
from broker.client.delivery_report import delivery_reports
from broker.client.producer_batch import ProducerBatch
from broker.errors import KafkaTimeoutError, NotEnoughReplicasError
from broker.records.arrow_body import record_batch

pytestmark = pytest.mark.unit


def _batch(created: float, n: int = 3) -> ProducerBatch:
    records = record_batch([b"k%d" % i for i in range(n)], [b"v%d" % i for i in range(n)],
                           [1_000 + i for i in range(n)])
    return ProducerBatch("orders", 2, b"", records, [print] * n, created)


def test_latency_is_the_seconds_from_produce_to_the_report_as_librdkafkas():
    reports = delivery_reports(_batch(created=100.0), None, base_offset=40, now=100.25)
    assert [msg.latency() for _, _, msg in reports] == [0.25] * 3
    assert [(msg.offset(), msg.timestamp()[1]) for _, _, msg in reports] == [(40, 1_000), (41, 1_001), (42, 1_002)]


def test_a_failed_record_has_a_latency_too():
    (_, err, msg), *_ = delivery_reports(_batch(created=5.0, n=1), NotEnoughReplicasError("2 of 3 in sync"),
                                         now=7.5)
    assert msg.latency() == 2.5
    assert err.code() == KafkaError.NOT_ENOUGH_REPLICAS and msg.error() == err


def test_a_timed_out_record_reports_msg_timed_out_with_its_latency():
    (_, err, msg), = delivery_reports(_batch(created=1.0, n=1), KafkaTimeoutError("expired"), now=121.0)
    assert err.code() == KafkaError._MSG_TIMED_OUT
    assert msg.latency() == 120.0 and msg.offset() == -1


def test_latency_defaults_to_the_monotonic_clock():
    import time
    (_, _, msg), = delivery_reports(_batch(created=time.monotonic() - 30, n=1), None, base_offset=0)
    assert 30 <= msg.latency() < 3600


def test_a_record_out_of_retries_after_a_broken_connection_reports_transport_as_librdkafka():
    from broker.errors import NetworkError
    broken = NetworkError("the produce stream broke")
    (_, err, msg), = delivery_reports(_batch(created=0.0, n=1), broken, now=1.0)
    assert err.code() == KafkaError._TRANSPORT and err.name() == "_TRANSPORT"
    assert err.exception() is broken and msg.error().code() == KafkaError._TRANSPORT
