"""A Streams application in its own process (its own SparkSession), so a test can crash it with
SIGKILL at a commit point (``RIVERLOG_CRASH_AT``, :mod:`spark_sink.crash_points`) and start it
again: ``python streams_app_process.py BOOTSTRAP STATE_DIR SOURCE OUT WINDOWED_OUT``.

It processes everything available, stops, and exits 0; run it with ``start_new_session=True`` (a
crash kills its session leader's process group). :func:`topology` is the application, which the
tests also give the reference interpreter.
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
    from streams.windows import TimeWindows
    b = StreamsBuilder()
    orders = b.stream(source, Consumed.with_(Serdes.String(), Serdes.Json(ORDER)))
    big = orders.filter("value.amount > 100").mapValues("named_struct('user', value.user, 'gross', value.amount * 2)")
    (big.groupBy("value.user", Grouped.as_("by-user").withKeySerde(Serdes.String())
                 .withValueSerde(Serdes.Json("user STRING, gross DOUBLE")))
        .count(materialized=Materialized.as_("per-user"))
        .toStream().to(out, Produced.with_(Serdes.String(), Serdes.Long())))
    (orders.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000))
        .count(materialized=Materialized.as_("per-key-window"))
        .toStream().map(lambda k, v: (f"{k.key}@{k.start}", v))
        .to(windowed_out, Produced.with_(Serdes.String(), Serdes.Long())))
    return b.build()


def config(bootstrap: str, state_dir: str) -> dict:
    return {"application.id": APP, "bootstrap.servers": bootstrap, "state.dir": state_dir,
            "maxOffsetsPerTrigger": MAX_OFFSETS_PER_TRIGGER}


def main(bootstrap: str, state_dir: str, source: str, out: str, windowed_out: str) -> None:
    # As tests/spark/conftest.py's session: Python workers run this interpreter and find this checkout.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    import spark_source
    from streams.app import StreamsApp
    spark = (SparkSession.builder.master("local[2]").appName("riverlog-streams-faults")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.warehouse.dir", os.path.join(state_dir, "..", "warehouse"))
             .getOrCreate())
    spark_source.register(spark)
    app = StreamsApp(topology(source, out, windowed_out), spark, config(bootstrap, state_dir)).start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    print("processed", flush=True)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main(*sys.argv[1:6])
