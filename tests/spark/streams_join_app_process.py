"""A Streams application with a stream–table join and a foreign-key join in its own process, so a
test can crash it with SIGKILL at a commit point (``RIVERLOG_CRASH_AT``, :mod:`spark_sink.crash_points`)
and start it again: ``python streams_join_app_process.py BOOTSTRAP STATE_DIR SUFFIX``.

It processes everything available, stops, and exits 0; run it with ``start_new_session=True``.
:func:`topology` is the application, which the test also gives the reference interpreter.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INPUTS = ("orders", "customers", "tiers")
OUTPUTS = ("enriched", "customer-tiers")
SHOW = lambda a, b: f"{a}|{b}"  # noqa: E731


def topics(suffix: str) -> dict[str, str]:
    return {name: f"{name}-{suffix}" for name in INPUTS + OUTPUTS}


def app_id(suffix: str) -> str:
    return f"join-faults-{suffix}"


def topology(suffix: str):
    """Two sub-topologies: orders joined with the customers table and the customers' foreign-key
    join to the tiers table (left side, with the answers), and the tiers with the subscriptions."""
    from streams.builder import StreamsBuilder
    from streams.parameters import Consumed, Materialized, Produced
    from streams.serdes import Serdes
    t, s = topics(suffix), Serdes.String()
    b = StreamsBuilder()
    c = Consumed.with_(s, s)
    customers = b.table(t["customers"], c, Materialized.as_("customers"))
    b.stream(t["orders"], c).join(customers, SHOW).to(t["enriched"], Produced.with_(s, s))
    tiers = b.table(t["tiers"], c, Materialized.as_("tiers"))
    (customers.leftJoin(tiers, foreign_key=lambda v: v.split("/")[0], joiner=SHOW)
     .toStream().to(t["customer-tiers"], Produced.with_(s, s)))
    return b.build()


def config(bootstrap: str, state_dir: str, suffix: str) -> dict:
    from tests.spark.child_process import EVERY_UPDATE
    return {"application.id": app_id(suffix), "bootstrap.servers": bootstrap, "state.dir": state_dir, **EVERY_UPDATE}


def main(bootstrap: str, state_dir: str, suffix: str) -> None:
    from tests.spark.child_process import run_streams_app
    run_streams_app("riverlog-streams-join-faults", 1, lambda: topology(suffix),
                    config(bootstrap, state_dir, suffix))


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main(*sys.argv[1:4])
