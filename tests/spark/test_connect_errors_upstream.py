"""Connect's error reporters against Kafka's ``LogReporter`` and ``DeadLetterQueueReporter``: the
log line names the stage and class and, with ``errors.log.include.messages``, a sink record's
coordinates but never its key or value, for every flagged record; a dead letter keeps the consumed
record's timestamp."""
from __future__ import annotations

import datetime
import logging

import pytest
from broker.client import Producer

from tests.conftest import wait_until
from tests.spark.connect_helpers import produce, read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

JSON = "org.apache.kafka.connect.json.JsonConverter"


def _flagged(spark, count: int = 1):
    from pyspark.sql import functions as F

    from connect.record_frame import ERROR, ERROR_TYPE, error_struct
    stamp = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)
    rows = [("orders", 0, 3 + i, stamp, b"k3", b"secret-card-4242") for i in range(count)]
    frame = spark.createDataFrame(rows, "topic string, partition int, offset long, timestamp timestamp, "
                                        "key binary, value binary")
    return frame.withColumn(ERROR, error_struct("value.converter", JSON, F.lit("Converting byte[] failed"))
                            .cast(ERROR_TYPE))


def _config(**extra):
    import connect.directory_sink  # noqa: F401  (registers DirectorySink)
    from connect.config import parse_connector_config
    return parse_connector_config({"name": "logged", "connector.class": "DirectorySink", "topics": "orders",
                                   "path": "/tmp/unused", "errors.tolerance": "all", "errors.log.enable": "true",
                                   **extra})


def test_the_error_log_names_stage_and_class_and_never_a_sink_records_content(spark, caplog):
    from connect import dead_letter
    with caplog.at_level(logging.ERROR, logger="connect.errors"):
        dead_letter.report(_flagged(spark), _config(**{"errors.log.include.messages": "true"}))
        dead_letter.report(_flagged(spark), _config())
    with_record, without = [r.getMessage() for r in caplog.records if r.name == "connect.errors"]
    assert with_record.startswith(
        "Error encountered in task logged-0. Executing stage 'VALUE_CONVERTER' with class "
        f"'{JSON}', where consumed record is {{topic='orders', partition=0, offset=3, timestamp=1704153600000, "
        "timestampType=CreateTime}.")
    assert without.startswith(
        f"Error encountered in task logged-0. Executing stage 'VALUE_CONVERTER' with class '{JSON}'.")
    for message in (with_record, without):
        assert "Converting byte[] failed" in message        # the exception, as Kafka logs it with the line
        assert "secret-card-4242" not in message and "k3" not in message


def test_every_flagged_record_is_logged_not_only_the_first_few(spark, caplog):
    from connect import dead_letter
    with caplog.at_level(logging.ERROR, logger="connect.errors"):
        rows = dead_letter.report(_flagged(spark, 45), _config(**{"errors.log.include.messages": "true"}))
    logged = [r.getMessage() for r in caplog.records if r.name == "connect.errors"]
    assert len(logged) == 45
    assert sorted(int(m.split("offset=")[1].split(",")[0]) for m in logged) == list(range(3, 48))
    assert rows and len(rows) <= 45


def test_a_dead_letter_keeps_the_consumed_records_timestamp(spark, spark_broker, tmp_path):
    from connect import Worker
    bootstrap = spark_broker.bootstrap
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce("stamped", value=b"{not json", key=b"k0", timestamp=1_600_000_000_123)
    assert p.flush(30) == 0
    produce(bootstrap, "stamped", [b'{"id": 1}'])
    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-errors-upstream",
                       "state.dir": str(tmp_path / "state")}).start()
    try:
        w.create_connector("stamped", {"connector.class": "DirectorySink", "topics": "stamped",
                                       "path": str(tmp_path / "out"), "key.converter": "StringConverter",
                                       "value.converter": JSON, "value.converter.schemas.enable": "false",
                                       "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "stamped-dlq"})
        dlq = wait_until(lambda: read_committed(bootstrap, "stamped-dlq"), 90, 0.3, "the dead letter")
    finally:
        w.close()
    assert [m.value() for m in dlq] == [b"{not json"]
    assert dlq[0].timestamp()[1] == 1_600_000_000_123
