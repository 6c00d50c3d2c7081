"""notebooks/03-connect.ipynb runs top to bottom as a user would run it, and what it printed is what
Connect must do: every good order through the transforms once, the broken lines in the dead-letter
queue with Kafka's context headers, offsets from the broker, and nothing moving while paused."""
from __future__ import annotations

import json
import os

import pytest

from tests.conftest import ROOT
from tests.spark.test_notebook import run

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

# Run in the notebook's kernel before its "Stop" cell: what it computed, as JSON.
_RESULTS = """
import json as _json
from broker.client import Consumer as _Consumer, TopicPartition as _TP
_c = _Consumer({"bootstrap.servers": servers, "group.id": "notebook-results"})
_end = _c.get_watermark_offsets(_TP("orders", 0), timeout=10)[1]
_c.close()
print("RESULTS " + _json.dumps({
    "final": final, "expected": [order(i) for i in range(50)], "bad": [lines[10], lines[25]],
    "dlq": [{"value": m.value().decode(), "headers": {k: (v.decode() if v is not None else None)
                                                      for k, v in (m.headers() or [])}} for m in dlq],
    "written_while_paused": written_while_paused, "paused_sink_offsets": paused_sink_offsets,
    "source_offsets": rest("GET", "/connectors/orders-from-file/offsets")["offsets"],
    "sink_offsets": rest("GET", "/connectors/orders-to-file/offsets")["offsets"],
    "file_size": os.path.getsize(orders_file), "end_offset": _end, "orders_file": orders_file,
    "states": {n: s["status"]["connector"]["state"] for n, s in rest("GET", "/connectors?expand=status").items()}}))
"""


def test_notebook_03_connect_moves_every_order_once_and_the_broken_ones_to_the_dlq():
    outputs = run(os.path.join(ROOT, "notebooks", "03-connect.ipynb"), _RESULTS)
    text = "\n".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "400 Connector configuration is invalid and contains the following 3 error(s)" in text, text
    [line] = [ln for ln in text.splitlines() if ln.startswith("RESULTS ")]
    got = json.loads(line[len("RESULTS "):])
    assert got["states"] == {"orders-from-file": "RUNNING", "orders-to-file": "RUNNING"}, got["states"]

    # Every good order once, in order, masked and tagged, nothing else changed (read back from the
    # value's toString, as Kafka's FileStreamSink writes it: every field a string there).
    expected = [{k: str(v) for k, v in {**o, "card": "****", "pipeline": "notebook"}.items()} for o in got["expected"]]
    assert got["final"] == expected, got["final"]

    # The two broken lines in the DLQ, as consumed, with Kafka's context headers.
    assert sorted(d["value"] for d in got["dlq"]) == sorted(got["bad"])
    for d, offset in zip(sorted(got["dlq"], key=lambda d: int(d["headers"]["__connect.errors.offset"])), (10, 25)):
        h = d["headers"]
        assert h["__connect.errors.topic"] == "orders" and h["__connect.errors.partition"] == "0", h
        assert h["__connect.errors.offset"] == str(offset), h
        assert h["__connect.errors.connector.name"] == "orders-to-file", h
        assert h["__connect.errors.stage"] == "VALUE_CONVERTER", h
        assert h["__connect.errors.class.name"] == "org.apache.kafka.connect.json.JsonConverter", h
        assert h["__connect.errors.exception.class.name"] and h["__connect.errors.exception.message"], h

    # Paused: the source copied the 10 new orders, the sink moved nothing (its offset is still
    # before them: the topic holds 52 records plus the source's transaction markers).
    assert got["written_while_paused"] == 40
    [paused] = got["paused_sink_offsets"]
    assert paused["partition"] == {"kafka_topic": "orders", "kafka_partition": 0}
    assert 42 <= paused["offset"]["kafka_offset"] <= got["end_offset"] - 10, (paused, got["end_offset"])
    # Offsets from the broker: the whole file read; the whole topic consumed.
    assert got["source_offsets"] == [{"partition": {"filename": got["orders_file"]},
                                      "offset": {"position": got["file_size"]}}]
    assert got["sink_offsets"] == [{"partition": {"kafka_topic": "orders", "kafka_partition": 0},
                                    "offset": {"kafka_offset": got["end_offset"]}}]
