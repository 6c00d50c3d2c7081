"""Interactive queries of a versioned table's store (KIP-914). Kafka's ``KafkaStreams#store`` (IQv1)
refuses it under every ``QueryableStoreTypes`` type: its ``MeteredVersionedKeyValueStore`` is a
``VersionedKeyValueStore``, no ``ReadOnlyKeyValueStore``, so ``QueryableStoreTypeMatcher.accepts``
fails and ``StreamThreadStateStoreProvider`` raises ``InvalidStateStoreException`` ("... does not
accept the actual store type ..."). Riverlog refuses it the same way when asked in Kafka's words
(``StoreQueryParameters``); asked by name, it answers each key's latest version (documented)."""
from __future__ import annotations

import pytest

from streams import Consumed, Materialized, Serdes, StreamsBuilder
from streams.errors import InvalidStateStoreError
from streams.store_query import QueryableStoreTypes, StoreQueryParameters
from streams.versioned import Stores

pytestmark = pytest.mark.unit
S = Serdes.String()


def versioned_app(tmp_path):
    from streams.app import StreamsApp
    b = StreamsBuilder()
    b.table("prices", Consumed.with_(S, S), Materialized.as_(Stores.persistentVersionedKeyValueStore("prices", 60_000)))
    return StreamsApp(b.build(), None, {"application.id": "iq", "bootstrap.servers": "127.0.0.1:1",
                                        "state.dir": str(tmp_path / "state")})


@pytest.mark.parametrize("wanted", [QueryableStoreTypes.keyValueStore(), QueryableStoreTypes.timestampedKeyValueStore(),
                                    QueryableStoreTypes.windowStore(), QueryableStoreTypes.sessionStore()],
                         ids=str)
def test_a_typed_query_of_a_versioned_store_is_refused_as_kafkas_iqv1(tmp_path, wanted):
    a = versioned_app(tmp_path)
    with pytest.raises(InvalidStateStoreError, match=rf"^Cannot get state store prices because the queryable store "
                                                     rf"type \[{wanted}\] does not accept the actual store type "
                                                     rf"\[versioned keyValue store\]\.$"):
        a.store(StoreQueryParameters.fromNameAndType("prices", wanted))
