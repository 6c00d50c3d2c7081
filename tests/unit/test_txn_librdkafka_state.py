"""The transaction manager while a commit or abort call is unfinished, as librdkafka's
``txn_may_enq``: the transaction takes no more records until that call is made again."""
from __future__ import annotations

import pytest

from broker.client.transactions import TransactionManager, TxnState
from broker.errors import KafkaError, StateError

pytestmark = pytest.mark.unit


def test_an_unfinished_commit_or_abort_refuses_records_with_local_state():
    for api in ("commit_transaction", "abort_transaction"):
        m = TransactionManager("app-1")
        m.new_epoch(7, 0)
        m.move(TxnState.READY)
        m.begin()
        m.check_can_produce()
        assert m.in_transaction
        m.unfinished = api          # its flush or EndTxn timed out: the application must call it again
        assert not m.in_transaction
        with pytest.raises(StateError) as raised:
            m.check_can_produce()
        assert raised.value.args[0].code() == KafkaError._STATE and api in str(raised.value)
        m.unfinished = None         # called again and finished
        m.check_can_produce()


def test_the_transactional_api_without_transactional_id_is_not_configured():
    """librdkafka's ``rd_kafka_ensure_transactional``: _NOT_CONFIGURED with its message (an
    InvalidConfigError still, for ``except`` clauses)."""
    from broker.client import Producer
    from broker.errors import InvalidConfigError
    with Producer({"bootstrap.servers": "127.0.0.1:1"}) as p:
        with pytest.raises(InvalidConfigError, match="^The Transactional API requires transactional.id to be "
                                                     "configured$") as e:
            p.init_transactions(1)
        assert e.value.args[0].code() == KafkaError._NOT_CONFIGURED
