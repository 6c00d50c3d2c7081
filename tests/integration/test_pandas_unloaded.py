"""A client that administers, produces (one record, an Arrow table, in a transaction), consumes
and commits, and the broker that serves it, never load pandas (:mod:`broker.records.arrow_arrays`):
pyarrow's converters import it on first use, a third of a second of CPU in every such process —
each broker, each ``riverlog`` command, each Spark Python worker reading or writing riverlog."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

CLIENT = textwrap.dedent("""
    import sys, time
    import pyarrow as pa
    from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
    servers, topic = sys.argv[1], sys.argv[2]
    AdminClient({"bootstrap.servers": servers}).create_topics([NewTopic(topic, 2)])[topic].result(30)
    p = Producer({"bootstrap.servers": servers, "transactional.id": topic})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce_batch(topic, pa.table({"key": pa.nulls(3, pa.binary()), "value": pa.nulls(3, pa.binary())}), 0)
    p.produce(topic, b"v", b"k", partition=1)
    p.commit_transaction(30)
    c = Consumer({"bootstrap.servers": servers, "group.id": topic, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < 4 and time.monotonic() < deadline:
        got += [m for m in c.consume(10, 0.5) if m.error() is None]
    c.commit(asynchronous=False)
    lows_highs = [c.get_watermark_offsets(TopicPartition(topic, i), 10) for i in range(2)]
    c.close()
    print(len(got), sum(high for _, high in lows_highs), "pandas" in sys.modules)
""")


def test_a_client_and_its_broker_leave_pandas_unloaded(shared_broker, topic_name):
    out = subprocess.run([sys.executable, "-c", CLIENT, shared_broker.bootstrap, topic_name], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # four records read; the high watermarks count them and the transaction's marker on each partition
    assert out.stdout.split() == ["4", "6", "False"], out.stdout
    with open(f"/proc/{shared_broker.proc.pid}/maps") as maps:
        assert "/pandas/" not in maps.read(), "the broker loaded pandas"
