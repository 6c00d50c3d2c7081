"""Consumer settings Spark's Kafka source refuses by name are refused by name here, with its reason."""
from __future__ import annotations

import pytest

from broker.errors import InvalidConfigError
from spark_source.options import SourceOptions


@pytest.mark.parametrize("setting, reason", [
    ("key.deserializer", "keys are returned as bytes"),
    ("value.deserializer", "values are returned as bytes"),
    ("interceptor.classes", "interceptor could change the records"),
])
def test_a_deserializer_or_interceptor_is_refused_when_the_query_starts_with_sparks_reason(setting, reason):
    """Spark's ``validateGeneralOptions`` refuses ``kafka.key.deserializer``, ``kafka.value.deserializer``
    and ``kafka.interceptor.classes`` before anything runs; accepted here, they failed later, when the
    driver made its consumer, as an unknown consumer property."""
    with pytest.raises(InvalidConfigError, match=rf"option 'riverlog.{setting}': is set by the riverlog source: "
                                                 rf".*{reason}"):
        SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                             f"riverlog.{setting}": "org.example.Custom"}, streaming=False)


@pytest.mark.parametrize("given, sentence", [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"startingOffsets": '{"t": {"0": -1}}'}, "startingOffsets for t-0 can't be latest for batch queries on Kafka"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"endingOffsets": '{"t": {"0": -2}}'}, "ending offset for t-0 can't be earliest for batch queries on Kafka"),
])
def test_a_batch_bound_spark_refuses_is_refused_with_sparks_sentence(given, sentence):
    """Spark's ``validateBatchOptions`` messages, quoted, so that what a Spark user searches for is there."""
    with pytest.raises(InvalidConfigError, match=sentence):
        SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **given}, streaming=False)
