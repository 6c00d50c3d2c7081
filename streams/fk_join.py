"""Foreign-key table joins (KIP-213): the left table joined to the right table by a key extracted
from each left row, through two internal topics, as Kafka Streams runs them.

- Left side, ``SubscriptionSend``: each left change becomes a *subscription* ``(hash of the new
  left value, instruction, primary key, partition)`` keyed by the foreign key and written to
  ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` (partitioned like the right table).
  A changed foreign key first unsubscribes from the old one, which does not answer.
- Right side: ``SubscriptionReceive`` keeps subscriptions per ``(foreign key, primary key)``;
  ``SubscriptionJoin`` answers each with the right row; ``ForeignTableJoin`` answers every
  subscriber of a right key when that row changes (the fan-out). Answers go to
  ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic``, to the partition the subscription came
  from.
- Left side, ``ResponseJoin``: an answer whose hash is not the hash of the left row's current
  value is stale (the row changed since) and is dropped; otherwise the joiner runs (a missing right
  row gives a tombstone in an inner join).

Both ends read their table's rows as forwarded (:func:`streams.table_store.forwarded`), not a
change still waiting in the record cache, since only forwarded changes send subscriptions and
fan-outs (see ``SubscriptionJoin`` and ``ResponseJoin``).

Instructions are Kafka's ``SubscriptionWrapper.Instruction``: the sender uses three, the receiver
understands all four. The hash is a 128-bit BLAKE2 of the canonical encoding of the value (Kafka:
Murmur3 of the serialized value): equal values, equal hash (see :func:`value_hash`).
"""
from __future__ import annotations

import hashlib
import logging
import pickle
from typing import Any, Callable

from streams.processor import Processor
from streams.record import Change, Record
from streams.table_join import forwarded_getter
from streams.table_store import value_or_none

log = logging.getLogger(__name__)

DELETE_KEY_AND_PROPAGATE = "DELETE_KEY_AND_PROPAGATE"
DELETE_KEY_NO_PROPAGATE = "DELETE_KEY_NO_PROPAGATE"
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE"
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE"


def value_hash(value, serde=None) -> bytes | None:
    """The canonical encoding of ``value``; a value it cannot encode (a ``uuid.UUID``, a struct
    with decimals or timestamps) is hashed by its bytes under the left table's value ``serde``, as
    Kafka hashes the serialized value, else by its pickle."""
    if value is None:
        return None
    from streams.state_codec import encode_key
    try:
        data = encode_key(value)
    except TypeError:
        data = None
        if serde is not None:
            try:
                data = serde.serialize(value)
            except Exception:       # the default serde may not take it: the pickle still hashes it
                data = None
        if data is None:
            data = pickle.dumps(value, protocol=4)
    return hashlib.blake2b(data, digest_size=16).digest()


class WrapperSerde:
    """How subscriptions ``(hash, instruction, pk, partition)`` and responses
    ``(hash, right value, partition)`` travel on the internal topics (format byte + pickle)."""
    def serialize(self, value) -> bytes | None:
        return None if value is None else b"\x01" + pickle.dumps(value, protocol=4)

    def deserialize(self, data: bytes | None):
        return None if data is None else pickle.loads(data[1:])


class SubscriptionSend(Processor):
    """``KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-``: left changes to subscriptions.

    Every change of a left row is answered exactly once, by the task of its new foreign key
    (``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``; a null key for a null foreign key, whose answer is
    null), a delete by its old one's (``DELETE_KEY_AND_PROPAGATE``, answered with a null at the
    later of the two rows' timestamps, as Kafka's); a changed foreign key unsubscribes from the
    old one without an answer (``DELETE_KEY_NO_PROPAGATE``). Answers from different tasks arrive in any order, and the
    resolver drops those whose hash is not the current value's, so the row's last answer is always
    the one for its current value: the result is right whatever the order (Kafka's left join since
    KAFKA-16394, which had the old key answer too). Kafka's inner join answers only when a right
    row matches in some cases (an insert, an unchanged key) and not at all in others (a delete of
    a row with a null key): a null answered to an earlier value of the row is then dropped as
    stale, and an old result stays. Here the inner join answers every change too, so a row that
    does not join gets a tombstone where Kafka emits nothing."""

    def __init__(self, extractor: Callable[[Any, Any], Any], left_join: bool, value_serde=None):
        self.extract, self.left_join, self.value_serde = extractor, left_join, value_serde

    def init(self, context) -> None:
        super().init(context)
        self.serde = self.value_serde or context.default_serde("value")

    def process(self, record: Record) -> None:
        change: Change = record.value
        if not change.is_latest:
            return
        key, new, old = record.key, change.new, change.old
        if old is None and new is None:
            return
        h = value_hash(new, self.serde)
        send = lambda fk, instruction: self.forward(
            record.with_(key=fk, value=(h, instruction, key, self.context.task)))
        old_fk = None if old is None else self.extract(key, old)
        new_fk = None if new is None else self.extract(key, new)
        if new is not None and new_fk is None and not self.left_join:
            _skip(self)        # joins nothing; the answer (a null) unsets an earlier result
        if new is None and old_fk is not None:
            # a delete is answered by the old key's task, at the later of its and the right row's
            # timestamps, as Kafka's
            send(old_fk, DELETE_KEY_AND_PROPAGATE)
            return
        if old_fk is not None and new_fk != old_fk:
            send(old_fk, DELETE_KEY_NO_PROPAGATE)
        send(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)


def _skip(p: Processor) -> None:
    log.warning("Skipping record due to null foreign key. topic=[%s] partition=[%s] offset=[%s]", *p.context.source())


class SubscriptionStore:
    """The subscription store: ``[fk, pk] -> (subscription, ts)`` plus, per foreign key, its
    subscribers' primary keys (Kafka prefix-scans ``CombinedKey`` bytes instead).

    The subscribers are kept in pages of at most :data:`PAGE` keys (``["n", fk]``: the number of
    pages, ``["p", fk, i]``: page ``i``, ``["w", fk, pk]``: the page holding ``pk``), so a new or
    removed subscriber rewrites one small page: one list of every subscriber made a foreign key
    with N subscribers cost O(N) per subscription, in time and in changelog bytes (O(N²) in all).
    A store written with that one list (``["i", fk]``) is still read, and shrinks as its
    subscribers leave; new subscribers go to pages."""

    PAGE = 64

    def __init__(self, kv):
        self.kv = kv

    def get(self, fk, pk):
        return self.kv.get(["s", fk, pk])

    def put(self, fk, pk, entry) -> None:
        known = self.get(fk, pk) is not None           # indexed already (in a page or the old list)
        self.kv.put(["s", fk, pk], entry)
        if known:
            return
        pages = self.kv.get(["n", fk]) or 0
        last = list(self.kv.get(["p", fk, pages - 1]) or ()) if pages else []
        if not pages or len(last) >= self.PAGE:
            last, pages = [], pages + 1
            self.kv.put(["n", fk], pages)
        last.append(pk)
        self.kv.put(["p", fk, pages - 1], last)
        self.kv.put(["w", fk, pk], pages - 1)

    def delete(self, fk, pk) -> None:
        if self.get(fk, pk) is None:
            return
        self.kv.delete(["s", fk, pk])
        page = self.kv.get(["w", fk, pk])
        if page is None:                               # in the one-list index of an older store
            pks = [p for p in (self.kv.get(["i", fk]) or ()) if p != pk]
            self.kv.put(["i", fk], pks or None)
            return
        self.kv.delete(["w", fk, pk])
        left = [p for p in (self.kv.get(["p", fk, page]) or ()) if p != pk]
        self.kv.put(["p", fk, page], left or None)
        pages = self.kv.get(["n", fk]) or 0
        trimmed = pages
        while trimmed and self.kv.get(["p", fk, trimmed - 1]) is None:
            trimmed -= 1                               # empty pages at the end go
        if trimmed != pages:
            self.kv.put(["n", fk], trimmed or None)

    def subscribers(self, fk) -> list:
        pks = list(self.kv.get(["i", fk]) or ())
        for page in range(self.kv.get(["n", fk]) or 0):
            pks.extend(self.kv.get(["p", fk, page]) or ())
        try:
            pks.sort()
        except TypeError:
            pass
        return [(pk, self.get(fk, pk)) for pk in pks]


class SubscriptionReceive(Processor):
    """``KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-`` (receive): store or delete the subscription and
    pass it on as ``Change(new, old)`` keyed ``(fk, pk)``."""

    def __init__(self, store: str):
        self.store_name = store

    def init(self, context) -> None:
        super().init(context)
        self.store = SubscriptionStore(context.store(self.store_name))

    def process(self, record: Record) -> None:
        sub = record.value
        fk, (h, instruction, pk, partition) = record.key, sub
        if fk is None and instruction != PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            return _skip(self)
        new = (sub, record.timestamp)
        old = None
        if fk is not None:
            old = self.store.get(fk, pk)
            if instruction in (DELETE_KEY_AND_PROPAGATE, DELETE_KEY_NO_PROPAGATE):
                self.store.delete(fk, pk)
            else:
                self.store.put(fk, pk, new)
        self.forward(record.with_(key=(fk, pk), value=Change(new, old)))


class SubscriptionJoin(Processor):
    """``KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-`` (join-foreign): answer a subscription with the
    right row, by its instruction.

    The row is read as the right table has forwarded it, not with a change still waiting in the
    record cache, which Kafka's ``SubscriptionJoinProcessorSupplier`` reads through its caching
    store. ``ForeignTableJoin`` sees only forwarded changes, and the flush drops some: a key
    created and deleted between two flushes (``CachingKeyValueStore.putAndMaybeForward``), a
    change that a filter below the cache turns into none. An answer read from the cache could
    then never be retracted: the right row ``B`` put, the subscription of a left row for ``B``
    answered with it, ``B`` deleted, and the left row stays joined with a row the right table no
    longer holds. Read as forwarded, the answer is followed by every later forwarded change of the
    row, through the fan-out, so the last answer is the row the right table ends with."""

    def __init__(self, getter):
        self.getter = getter

    def init(self, context) -> None:
        super().init(context)
        self.get = forwarded_getter(self.getter).open(context)

    def process(self, record: Record) -> None:
        (fk, pk), ((h, instruction, _, partition), ts) = record.key, record.value.new
        right = None if fk is None else self.get(fk)
        out_ts = ts if right is None else max(ts, right.timestamp)
        if instruction == DELETE_KEY_AND_PROPAGATE:
            response = (h, None, partition)
        elif instruction == PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            response = (h, value_or_none(right), partition)
        elif instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and right is not None:
            response = (h, right.value, partition)
        else:
            return
        self.forward(Record(pk, response, out_ts, record.headers))


class ForeignTableJoin(Processor):
    """``KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-`` (foreign-join-subscription): a right row's change
    answers every subscriber of its key, in the order of their serialized primary keys (Kafka
    prefix-scans ``CombinedKey`` bytes: an Integer key -1 comes after 256)."""

    def __init__(self, store: str, pk_serde=None):
        self.store_name, self.pk_serde = store, pk_serde

    def init(self, context) -> None:
        super().init(context)
        self.store = SubscriptionStore(context.store(self.store_name))
        self.serde = self.pk_serde or context.default_serde("key")

    def _in_key_order(self, subscribers: list) -> list:
        if self.serde is None:
            return subscribers
        try:
            return sorted(subscribers, key=lambda s: self.serde.serialize(s[0]) or b"")
        except Exception:       # a key the serde cannot write fails later, where it is written
            return subscribers

    def process(self, record: Record) -> None:
        if record.key is None or not record.value.is_latest:
            return
        for pk, entry in self._in_key_order(self.store.subscribers(record.key)):
            (h, _, _, partition), _ts = entry
            self.forward(Record(pk, (h, record.value.new, partition), record.timestamp, record.headers))


class ResponseJoin(Processor):
    """``KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-``: drop stale answers (hash of the
    current left value differs), else join.

    The answer must also be for the left row as the left table has forwarded it: subscriptions
    are sent from forwarded changes only. While a newer value waits in the record cache, a late
    answer for an earlier value may match it (the row was that value before, then changed, then
    changed back), and if the row is deleted again before the flush (a key absent before and
    after is not forwarded), no subscription follows to replace the joined result. Kafka's
    resolver reads only the cached value. A waiting value's flush sends its own subscription, so
    an answer dropped here for it is answered again."""

    def __init__(self, getter, joiner: Callable, left_join: bool, value_serde=None):
        self.getter, self.joiner, self.left_join, self.value_serde = getter, joiner, left_join, value_serde

    def init(self, context) -> None:
        super().init(context)
        self.serde = self.value_serde or context.default_serde("value")
        self.get = self.getter.open(context)
        self.get_forwarded = forwarded_getter(self.getter).open(context)

    def process(self, record: Record) -> None:
        h, right, _ = record.value
        current = self.get(record.key)
        if value_hash(value_or_none(current), self.serde) != h or \
                value_hash(value_or_none(self.get_forwarded(record.key)), self.serde) != h:
            return
        if right is None and (not self.left_join or current is None):
            result = None
        else:
            result = self.joiner(record.key, value_or_none(current), right)
        self.forward(record.with_(value=result))


def response_partition(key, value, topic):
    """Answers go back to the partition the subscription came from."""
    return value[2]
