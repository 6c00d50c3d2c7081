"""Kafka Streams' programming model on PySpark: a topology built with the DSL runs as Structured
Streaming queries over Riverlog topics (``builder.build(spark, config).start()``), or in plain
Python under :class:`streams.testing.TopologyTestDriver`.

    from streams import StreamsBuilder, Serdes, Consumed, Produced, Grouped, TimeWindows

``StreamsApp`` is imported when first named: Spark's Python workers import this package to run a
task, and the application's module brings the broker client (gRPC, pandas) a task never uses.
"""
from streams.app_state import State, StreamThreadExceptionResponse
from streams.builder import StreamsBuilder
from streams.errors import (IllegalStateError, InvalidStateStoreError, InvalidStateStorePartitionError, StreamsError,
                            StreamsNotStartedError, TopologyError, UnknownStateStoreError)
from streams.cogroup import CogroupedKStream
from streams.global_table import GlobalKTable, GlobalTableSharedError
from streams.joins import Joined, JoinNotOnSparkError, StreamJoined, TableJoined, TopicsNotCopartitionedError
from streams.grouped import (EmitStrategy, KGroupedStream, KGroupedTable, SessionWindowedKStream,
                             TimeWindowedKStream)
from streams.kstream import BranchedKStream, KStream
from streams.ktable import KTable
from streams.parameters import Branched, Consumed, Grouped, Materialized, Named, Produced, Repartitioned
from streams.printed import Printed
from streams.record import Windowed
from streams.serde_base import SerializationError
from streams.serdes import Serdes, WindowedSerdes
from streams.store_query import QueryableStoreTypes, StoreQueryParameters
from streams.suppress import BufferConfig, Suppressed, SuppressionBufferFullError
from streams.topology import Topology
from streams.column_functions import Vectorized, VectorizedFunctionError, VectorizedResultError, vectorized
from streams.store_suppliers import Stores
from streams.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows
from streams.unlimited_windows import UnlimitedWindows

__all__ = [
    "StreamsBuilder", "StreamsApp", "Topology", "KStream", "KTable", "KGroupedStream", "KGroupedTable",
    "TimeWindowedKStream", "SessionWindowedKStream", "BranchedKStream", "Serdes", "Consumed", "Produced",
    "Grouped", "Materialized", "Named", "Printed", "Repartitioned", "Branched", "Suppressed", "BufferConfig",
    "EmitStrategy", "TimeWindows", "SlidingWindows", "SessionWindows", "JoinWindows", "UnlimitedWindows", "Windowed",
    "TopologyError", "StreamsError", "InvalidStateStoreError", "GlobalKTable", "CogroupedKStream", "Joined",
    "StreamJoined", "TableJoined", "TopicsNotCopartitionedError", "Stores", "WindowedSerdes", "State",
    "StreamThreadExceptionResponse", "StoreQueryParameters", "QueryableStoreTypes", "vectorized", "Vectorized",
    # the errors docs/streams.md names (ExpressionEvaluationError and StateLayoutError load on first use)
    "IllegalStateError", "StreamsNotStartedError", "UnknownStateStoreError", "InvalidStateStorePartitionError",
    "GlobalTableSharedError", "JoinNotOnSparkError", "SerializationError", "SuppressionBufferFullError",
    "VectorizedFunctionError", "VectorizedResultError", "ExpressionEvaluationError", "StateLayoutError",
]
_LAZY = {"StreamsApp": "streams.app", "ExpressionEvaluationError": "streams.sql_values",
         "StateLayoutError": "streams.state_buckets"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'streams' has no attribute {name!r}")
