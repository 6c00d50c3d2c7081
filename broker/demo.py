"""``make demo``: an embedded single-node broker, a topic, records in, records out.

Runs in one process so it needs nothing but the installed package:

    python -m broker.demo
"""
from __future__ import annotations

import time

import pyarrow as pa

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.server.service import EmbeddedBroker


def main() -> None:
    with EmbeddedBroker() as broker:
        servers = broker.bootstrap_servers
        print(f"embedded broker listening on {servers} (data in {broker.config['log.dirs']})")
        with AdminClient({"bootstrap.servers": servers}) as admin:
            admin.create_topics([NewTopic("orders", num_partitions=3)])["orders"].result()
        print("created topic 'orders' with 3 partitions")

        delivered = []
        producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 5})
        for i in range(9):
            producer.produce("orders", key=f"user-{i % 3}", value=f'{{"order": {i}, "amount": {10 * i}}}',
                             headers=[("source", b"demo")],
                             on_delivery=lambda err, msg: delivered.append((err, msg)))
        n = 100_000
        table = pa.table({"key": pa.array([f"user-{i % 50}".encode() for i in range(n)]),
                          "value": pa.array([b"x" * 100] * n)})
        started = time.perf_counter()
        producer.produce_batch("orders", table)
        producer.flush(30)
        bulk_seconds = time.perf_counter() - started
        producer.close()
        errors = [err for err, _ in delivered if err is not None]
        print(f"produced 9 records one by one ({len(delivered) - len(errors)} acknowledged) "
              f"and {n:,} with produce_batch in {bulk_seconds:.2f}s")
        for err, msg in delivered[:3]:
            print(f"  delivered key={msg.key()!r} to partition {msg.partition()} at offset {msg.offset()}")

        consumer = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("orders", p, OFFSET_BEGINNING) for p in range(3)])
        print("the records produced one by one, read back:")
        shown, total = 0, 0
        while shown < 9:
            msg = consumer.poll(5.0)
            if msg is None:
                break
            total += 1
            if not msg.value().startswith(b"x"):
                shown += 1
                print(f"  {msg.topic()}[{msg.partition()}]@{msg.offset()} key={msg.key().decode()} "
                      f"value={msg.value().decode()} headers={msg.headers()}")
        started = time.perf_counter()
        while total < n + 9:
            batch = consumer.poll_batch(5.0)
            if batch is None:
                break
            total += batch.num_rows
        consumer.close()
        print(f"read all back (the rest with poll_batch): {total:,} of {n + 9:,} records in {time.perf_counter() - started:.2f}s")
    print("broker stopped cleanly")


if __name__ == "__main__":
    main()
