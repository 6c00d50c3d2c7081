"""``riverlog transactions`` and the AdminClient's transaction methods against a real broker process: a
transactional producer leaves a transaction open (a "hanging" transaction); list, describe and
describe-producers find it holding the last stable offset back; abort ends it and fences the producer."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, Producer, TopicPartition
from broker.errors import InvalidTxnStateError, ProducerFencedError, TransactionalIdNotFoundError
from tests.conftest import wait_until
from tests.integration.test_cli import create_topic, lines, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cli(shared_broker):
    def run(*args, check=True):
        return run_cli(shared_broker.bootstrap, *args, check=check)
    return run


def _open_transaction(bootstrap: str, txn_id: str, topic: str, values: list[bytes], partition: int = 0) -> Producer:
    """A transactional producer whose transaction is open, its records delivered, not committed."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=partition)
    assert p.flush(30) == 0
    return p


def _plain(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for v in values:
            p.produce(topic, value=v, partition=partition)
        assert p.flush(30) == 0


def _read(bootstrap: str, topic: str, partition: int, level: str, last: bytes) -> list[bytes]:
    """Every value a reader with isolation ``level`` gets from the beginning up to the value ``last``.

    (Reading up to a committed record rather than to an offset: the consumer's position() does not
    move past control batches or skipped aborted records, so it never reaches the high watermark.)"""
    c = Consumer({"bootstrap.servers": bootstrap, "isolation.level": level})
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    out = []
    try:
        def done():
            out.extend(m.value() for m in c.consume(100, 0.2) if m.error() is None)
            return last in out
        wait_until(done, 30, 0, f"a {level} reader to get {last!r}")
    finally:
        c.close()
    return out


def _kafka_table(text: str) -> list[list[str]]:
    """ToolsUtils.prettyPrintTable's lines: each value padded, then a tab."""
    out = lines(text)
    assert all(line.endswith("\t") for line in out), out
    return [[v.strip() for v in line.split("\t")[:-1]] for line in out]


def _fields(text: str) -> dict[str, str]:
    """``describe``'s table (kafka-transactions describe) of one transactional.id, by column."""
    header, row = _kafka_table(text)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"], header
    return dict(zip(header, row))


def _producers(text: str) -> dict[int, dict]:
    """``describe-producers [--all]`` output as {partition: {"lso", "hw", "open": [[pid, epoch, first,
    started]], "active": [[pid, epoch, last sequence, last write, txn start offset]]}}."""
    out, current, section = {}, None, None
    for row in (line.split() for line in lines(text)):
        if not row:
            continue
        if row[0] in ("TOPIC", "PRODUCER-ID", "ACTIVE-PRODUCER-ID"):
            section = row[0]
        elif row[0].startswith("("):
            continue
        elif section == "TOPIC":
            current = out[int(row[1])] = {"lso": int(row[2]), "hw": int(row[3]), "open": [], "active": []}
        else:
            current["open" if section == "PRODUCER-ID" else "active"].append(row)
    return out


def _listed(text: str) -> dict[str, list[str]]:
    """``list``'s table (kafka-transactions list) as {transactional.id: [producer id, state, coordinator]}."""
    rows = _kafka_table(text)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows
    return {r[0]: [r[2], r[3], r[1]] for r in rows[1:]}


def test_cli_finds_and_aborts_a_hanging_transaction(cli, shared_broker, topic_name):
    bootstrap, txn_id = shared_broker.bootstrap, f"hanging-{topic_name}"
    create_topic(bootstrap, topic_name, partitions=2)
    _plain(bootstrap, topic_name, [b"before"])                                  # offset 0, committed
    producer = _open_transaction(bootstrap, txn_id, topic_name, [b"t0", b"t1", b"t2"])   # offsets 1-3, open
    try:
        listed = _listed(cli("transactions", "list").stdout)
        assert listed[txn_id][1] == "Ongoing", listed
        pid = listed[txn_id][0]

        described = _fields(cli("transactions", "describe", txn_id).stdout)
        assert (described["TransactionState"], described["ProducerId"], described["ProducerEpoch"]) == \
            ("Ongoing", pid, "0")
        assert described["TopicPartitions"] == f"{topic_name}-0", described
        assert int(described["CurrentTransactionStartTimeMs"]) > 0 and int(described["TransactionDurationMs"]) >= 0

        held = _producers(cli("transactions", "describe-producers", "--topic", topic_name).stdout)
        assert (held[0]["lso"], held[0]["hw"]) == (1, 4), held
        assert [o[:3] for o in held[0]["open"]] == [[pid, "0", "1"]], held
        assert (held[1]["lso"], held[1]["hw"], held[1]["open"]) == (0, 0, []), held
        assert held[0]["active"] == [], held                                     # only with --all

        every = _producers(cli("transactions", "describe-producers", "--topic", topic_name, "--all").stdout)
        active = {row[0]: row for row in every[0]["active"]}
        assert len(active) == 2, every                     # the plain idempotent producer too
        assert [active[pid][i] for i in (1, 2, 4)] == ["0", "2", "1"], every   # epoch, last sequence, txn start

        # kafka-transactions find-hanging: old enough (timeout 0) but its coordinator holds the
        # partition in an Ongoing transaction, so it is not hanging: the header alone
        found = cli("transactions", "find-hanging", "--topic", topic_name, "--max-transaction-timeout", 0).stdout
        assert _kafka_table(found) == [["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                        "StartOffset", "LastTimestamp", "Duration(min)"]], found

        aborted = cli("transactions", "abort", "--transactional-id", txn_id).stdout
        assert f"producer id {pid} is now at epoch 1" in aborted, aborted

        described = _fields(cli("transactions", "describe", "--transactional-id", txn_id).stdout)   # Kafka's spelling
        assert (described["TransactionState"], described["ProducerEpoch"]) == ("CompleteAbort", "1"), described
        assert described["TopicPartitions"] == "", described
        assert _listed(cli("transactions", "list").stdout)[txn_id][1] == "CompleteAbort"

        held = _producers(cli("transactions", "describe-producers", "--topic", topic_name,
                              "--partition", "0").stdout)
        assert list(held) == [0] and held[0]["open"] == [], held
        assert held[0]["lso"] == held[0]["hw"] == 5, held   # 1 + 3 records + the abort marker

        _plain(bootstrap, topic_name, [b"after"])                               # offset 5, after the marker
        assert _read(bootstrap, topic_name, 0, "read_committed", b"after") == [b"before", b"after"]
        assert _read(bootstrap, topic_name, 0, "read_uncommitted", b"after") == \
            [b"before", b"t0", b"t1", b"t2", b"after"]

        with pytest.raises(ProducerFencedError):
            producer.commit_transaction(10)
    finally:
        producer.close(5)

    again = cli("transactions", "abort", "--transactional-id", txn_id, check=False)
    assert again.returncode == 1 and "INVALID_TXN_STATE" in again.stderr, again.stderr
    assert len(lines(again.stderr)) == 1, again.stderr
    missing = cli("transactions", "describe", f"no-such-{topic_name}", check=False)
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr, missing.stderr


def test_admin_client_transaction_methods(shared_broker, topic_name):
    bootstrap, txn_id = shared_broker.bootstrap, f"admin-{topic_name}"
    create_topic(bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    producer = _open_transaction(bootstrap, txn_id, topic_name, [b"a", b"b"])
    try:
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            listing = {t.transactional_id: t for t in admin.list_transactions().result(30)}[txn_id]
            assert listing.state == "Ongoing" and listing.coordinator >= 0

            d = admin.describe_transactions([txn_id])[txn_id].result(30)
            assert (d.state, d.producer_id, d.producer_epoch) == ("Ongoing", listing.producer_id, 0)
            assert d.topic_partitions == [tp] and d.groups == [] and d.start_ms > 0 and d.timeout_ms > 0

            p = admin.describe_producers([tp])[tp].result(30)
            assert (p.last_stable_offset, p.high_watermark) == (0, 2)
            assert [(o.producer_id, o.producer_epoch, o.first_offset) for o in p.open_transactions] == \
                [(listing.producer_id, 0, 0)]

            assert admin.abort_transaction(txn_id).result(30) == (listing.producer_id, 1)

            d = admin.describe_transactions([txn_id])[txn_id].result(30)
            assert (d.state, d.producer_epoch, d.topic_partitions) == ("CompleteAbort", 1, [])
            p = admin.describe_producers([tp])[tp].result(30)
            assert (p.last_stable_offset, p.high_watermark, p.open_transactions) == (3, 3, [])

            with pytest.raises(InvalidTxnStateError):
                admin.abort_transaction(txn_id).result(30)
            with pytest.raises(TransactionalIdNotFoundError):
                admin.describe_transactions([f"no-such-{topic_name}"])[f"no-such-{topic_name}"].result(30)
        with pytest.raises(ProducerFencedError):
            producer.abort_transaction(10)
    finally:
        producer.close(5)


def test_cli_aborts_by_partition_and_start_offset_as_kafka_transactions(cli, shared_broker, topic_name):
    """``kafka-transactions abort --topic T --partition P --start-offset O``: the open transaction
    starting at O on T-P is aborted, nothing printed; Kafka's messages and exit status 1 otherwise."""
    bootstrap, txn_id = shared_broker.bootstrap, f"by-offset-{topic_name}"
    create_topic(bootstrap, topic_name, partitions=1)
    _plain(bootstrap, topic_name, [b"before"])                                   # offset 0
    producer = _open_transaction(bootstrap, txn_id, topic_name, [b"t0", b"t1"])  # offsets 1-2, open
    tp = TopicPartition(topic_name, 0)
    where = ("--topic", topic_name, "--partition", "0")
    try:
        unnamed = cli("transactions", "abort", *where, check=False)
        assert unnamed.returncode == 1 and "identified either with --start-offset" in unnamed.stderr, unnamed.stderr
        no_epoch = cli("transactions", "abort", *where, "--producer-id", "1", "--producer-epoch", "0", check=False)
        assert (no_epoch.returncode, lines(no_epoch.stderr)) == \
            (1, ["Error: Missing required argument --coordinator-epoch"]), no_epoch.stderr
        wrong = cli("transactions", "abort", *where, "--start-offset", "2", check=False)
        assert wrong.returncode == 1 and lines(wrong.stderr) == [
            f"Error: Could not find any open transactions starting at offset 2 on partition {topic_name}-0"], \
            wrong.stderr

        # kafka-transactions list --duration-filter: only transactions running longer than that many ms
        def listed_after(ms):
            result = CliRunner().invoke(main, ["-b", bootstrap, "transactions", "list", "--duration-filter", ms])
            assert result.exit_code == 0, result.output
            return _listed(result.stdout)
        assert listed_after("0")[txn_id][1] == "Ongoing"
        assert txn_id not in listed_after("3600000")

        aborted = cli("transactions", "abort", *where, "--start-offset", "1")
        assert aborted.stdout == "", aborted.stdout
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            p = admin.describe_producers([tp])[tp].result(30)
            assert (p.last_stable_offset, p.high_watermark, p.open_transactions) == (4, 4, []), p
            assert admin.describe_transactions([txn_id])[txn_id].result(30).state == "CompleteAbort"
        _plain(bootstrap, topic_name, [b"after"])
        assert _read(bootstrap, topic_name, 0, "read_committed", b"after") == [b"before", b"after"]
        with pytest.raises(InvalidTxnStateError):     # its transaction was ended under it
            producer.commit_transaction(10)
    finally:
        producer.close(5)
