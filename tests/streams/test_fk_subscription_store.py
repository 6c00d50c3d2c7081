"""The foreign-key join's subscription store: its subscribers against a model over random histories,
the cost of one subscription (one small page rewritten, whatever the number of subscribers), and a
store written with the older one-list index still read and shrunk."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.fk_join import SubscriptionStore
from streams.stores import DictBacking, KeyValueStore

pytestmark = pytest.mark.unit


def _store() -> tuple[SubscriptionStore, DictBacking]:
    backing = DictBacking()
    return SubscriptionStore(KeyValueStore("subs", backing)), backing


OPS = st.lists(st.tuples(st.booleans(), st.sampled_from("AB"), st.integers(0, 150)), max_size=400)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_subscribers_are_the_models_after_any_history(ops):
    store, _ = _store()
    model: dict = {"A": {}, "B": {}}
    for i, (add, fk, pk) in enumerate(ops):
        if add:
            store.put(fk, pk, (f"sub{i}", i))
            model[fk][pk] = (f"sub{i}", i)
        else:
            store.delete(fk, pk)
            model[fk].pop(pk, None)
    for fk in "AB":
        assert store.subscribers(fk) == sorted(model[fk].items())
        assert all(store.get(fk, pk) == entry for pk, entry in model[fk].items())


def test_a_subscription_rewrites_one_small_page_whatever_the_number_of_subscribers():
    """Each write of the store is a changelog record: a new subscriber of a key with thousands of
    them writes a page of at most PAGE keys, not the list of them all."""
    store, backing = _store()
    for pk in range(3000):
        store.put("A", pk, ("sub", pk))
    written = lambda changes: max(len(v) for k, v in changes if isinstance(v, list))
    assert written(backing.changes) <= SubscriptionStore.PAGE
    before = len(backing.changes)
    store.delete("A", 1500)
    store.put("A", 1500, ("again", 1))
    assert written(backing.changes[before:]) <= SubscriptionStore.PAGE and len(backing.changes) - before <= 8
    assert [pk for pk, _ in store.subscribers("A")] == list(range(3000))


def test_a_store_with_the_one_list_index_is_read_and_shrinks():
    store, backing = _store()
    kv = KeyValueStore("subs", backing)
    for pk in (1, 2, 3):
        kv.put(["s", "A", pk], ("old", pk))
    kv.put(["i", "A"], [1, 2, 3])
    store.put("A", 2, ("updated", 9))                 # known already: no second index entry
    store.put("A", 4, ("new", 4))
    assert store.subscribers("A") == [(1, ("old", 1)), (2, ("updated", 9)), (3, ("old", 3)), (4, ("new", 4))]
    store.delete("A", 1)
    store.delete("A", 4)
    assert kv.get(["i", "A"]) == [2, 3] and store.subscribers("A") == [(2, ("updated", 9)), (3, ("old", 3))]
    store.delete("A", 2)
    store.delete("A", 3)
    assert store.subscribers("A") == [] and kv.get(["i", "A"]) is None and kv.get(["n", "A"]) is None
