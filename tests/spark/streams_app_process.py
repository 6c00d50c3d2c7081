"""A Streams application in its own process (its own SparkSession), so a test can crash it with
SIGKILL at a commit point (``RIVERLOG_CRASH_AT``, :mod:`spark_sink.crash_points`) and start it
again: ``python streams_app_process.py BOOTSTRAP STATE_DIR SOURCE OUT WINDOWED_OUT [TABLE_SOURCE]``,
or ``python streams_app_process.py --buffered BOOTSTRAP STATE_DIR SOURCE PREFIX`` for
:func:`buffered_topology` (``tests/spark/test_streams_restore_fidelity.py``).

It processes everything available, stops, and exits 0; run it with ``start_new_session=True`` (a
crash kills its session leader's process group). :func:`topology` is the application (with a
``TABLE_SOURCE``, :func:`combined_topology`), which the tests also give the reference interpreter.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORDER = "user STRING, amount DOUBLE"
APP = "faults-app"
MAX_OFFSETS_PER_TRIGGER = 6


def topology(source: str, out: str, windowed_out: str):
    """Two sub-topologies (a repartition by user): a per-user count and a windowed per-key count."""
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Grouped, Materialized, Produced
    from streams.serdes import Serdes
    b = StreamsBuilder()
    orders = b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER)))
    big = orders.filter("value.amount > 100").mapValues("named_struct('user', value.user, 'gross', value.amount * 2)")
    (big.groupBy("value.user", Grouped.as_("by-user").withKeySerde(Serdes.String())
                 .withValueSerde(Serdes.Json("user STRING, gross DOUBLE")))
        .count(materialized=Materialized.as_("per-user"))
        .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    windowed_count(orders, windowed_out)
    return b.build()


def windowed_count(orders, windowed_out: str) -> None:
    """Both applications' windowed per-key count (store ``per-key-window``) to ``windowed_out``."""
    from streams.parameters import Materialized, Produced
    from streams.serdes import Serdes
    from streams.windows import TimeWindows
    (orders.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000))
        .count(materialized=Materialized.as_("per-key-window"))
        .toStream().map(lambda k, v: (f"{k.key}@{k.start}", v))
        .to(windowed_out, Produced.with_(Serdes.String(), Serdes.Long())))


def combined_topology(source: str, out: str, windowed_out: str, table_source: str):
    """The same two outputs from the steps that combine rows with Arrow before a task: the
    windowed count alone on its source (counted per window), and a table of each key's latest
    order (each key's last record of a batch kept) whose rows are counted per user (per key),
    moving between users as a key's order changes."""
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Grouped, Materialized, Produced
    from streams.serdes import Serdes
    b = StreamsBuilder()
    windowed_count(b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER))), windowed_out)
    (b.table(table_source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER)), Materialized.as_("latest-order"))
        .groupBy("value.user", Grouped.with_(Serdes.String(), Serdes.Json(ORDER)))
        .count(materialized=Materialized.as_("per-user"))
        .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    return b.build()


BUFFERED_APP = "restore-fidelity-app"
BUFFERED_OUTPUTS = ("final", "sessions", "sliding", "cogroup", "final-table")


def buffered_topology(source: str, prefix: str):
    """The operators whose state is more than a table or a window count, in one sub-topology (one
    task): a tumbling count behind ``suppress(untilWindowCloses)``, a session count (merges
    retract), a sliding count emitted on window close (KIP-825), and a cogroup behind
    ``suppress(untilTimeLimit)`` whose two-record buffer emits early, and the tumbling count's final
    results again through ``toStream().toTable().suppress(...)``. Each writes
    ``<prefix>-<output>`` (:data:`BUFFERED_OUTPUTS`), windowed keys as ``key@start-end``."""
    from streams import (BufferConfig, Consumed, EmitStrategy, Materialized, Produced, Serdes,
                         SessionWindows, SlidingWindows, StreamsBuilder, Suppressed, TimeWindows)
    S, L = Serdes.String(), Serdes.Long()
    b = StreamsBuilder()
    events = b.stream(source, Consumed.with_(S, S))

    def out(table, name):
        (table.toStream().map(lambda k, v: (f"{k.key}@{k.start}-{k.end}", v))
         .to(f"{prefix}-{name}", Produced.with_(S, L)))
    tumbling = events.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(1_000, 200)) \
        .count(materialized=Materialized.as_("tumbling"))
    out(tumbling.suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()).withName("final")), "final")
    out(events.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(500, 100))
        .count(materialized=Materialized.as_("sessions")), "sessions")
    out(events.groupByKey().windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(500, 100))
        .emitStrategy(EmitStrategy.onWindowClose()).count(materialized=Materialized.as_("sliding")), "sliding")
    (events.filter(lambda k, v: v == "a").groupByKey().cogroup(lambda k, v, agg: agg + 1)
        .cogroup(events.filter(lambda k, v: v != "a").groupByKey(), lambda k, v, agg: agg + 100)
        .aggregate(lambda: 0, materialized=Materialized.as_("cogrouped").withValueSerde(L))
        .suppress(Suppressed.untilTimeLimit(400, BufferConfig.maxRecords(2)).withName("limited"))
        .toStream().to(f"{prefix}-cogroup", Produced.with_(S, L)))
    # the same final results through a table of the windowed stream: its store keyed by windowed
    # keys, the suppression finding the windows' grace up the graph
    out(tumbling.toStream().toTable()
        .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded()).withName("final-table")), "final-table")
    return b.build()


def buffered_config(bootstrap: str, state_dir: str) -> dict:
    """Every update forwarded (no record cache), so the output equals the driver's record by record."""
    return {"application.id": BUFFERED_APP, "bootstrap.servers": bootstrap, "state.dir": state_dir,
            "maxOffsetsPerTrigger": MAX_OFFSETS_PER_TRIGGER, "statestore.cache.max.bytes": 0}


def config(bootstrap: str, state_dir: str) -> dict:
    """Kafka's record cache on (the default): each batch forwards a key's latest update."""
    return {"application.id": APP, "bootstrap.servers": bootstrap, "state.dir": state_dir,
            "maxOffsetsPerTrigger": MAX_OFFSETS_PER_TRIGGER}


def main(bootstrap: str, state_dir: str, source: str, out: str, windowed_out: str, table_source: str = "") -> None:
    from tests.spark.child_process import run_streams_app
    make = ((lambda: combined_topology(source, out, windowed_out, table_source)) if table_source
            else (lambda: topology(source, out, windowed_out)))
    run_streams_app("riverlog-streams-faults", 2, make, config(bootstrap, state_dir))


def main_buffered(bootstrap: str, state_dir: str, source: str, prefix: str) -> None:
    from tests.spark.child_process import run_streams_app
    run_streams_app("riverlog-streams-restore", 2, lambda: buffered_topology(source, prefix),
                    buffered_config(bootstrap, state_dir))


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    if sys.argv[1] == "--buffered":
        main_buffered(*sys.argv[2:6])
    else:
        main(*sys.argv[1:7])
