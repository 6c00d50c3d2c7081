"""A Connect worker in its own process (its own SparkSession), so a test can SIGKILL it mid-stream
and start it again: ``python connect_worker_process.py BOOTSTRAP STATE_DIR CONNECTORS_JSON``.

It starts the worker (which resumes every connector found in the connect topics), creates the
connectors of CONNECTORS_JSON (a list of ``{"name", "config"}``) that do not exist yet, prints
``READY`` and runs until killed. Run it with ``start_new_session=True``.
"""
from __future__ import annotations

import json
import os
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP = "connect-restart"


def main(bootstrap: str, state_dir: str, connectors: str) -> None:
    sys.path.insert(0, ROOT)
    from tests.spark.child_process import child_spark
    spark = child_spark("riverlog-connect-worker", 2, os.path.join(state_dir, "..", "warehouse"))
    from connect import Worker
    worker = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": GROUP, "state.dir": state_dir}).start()
    for body in json.loads(connectors):
        if body["name"] not in worker.connectors():
            worker.create_connector(body["name"], body["config"])
    print("READY", flush=True)
    while not threading.Event().wait(5):  # the statuses in the log, for a failing test to show
        print("STATUS", json.dumps({n: worker.connector_status(n) for n in worker.connectors()}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
