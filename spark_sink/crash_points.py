"""Crash points for fault tests: ``RIVERLOG_CRASH_AT=<point>:<batch>`` kills the application with
SIGKILL when batch ``<batch>`` of an exactly-once write, or the first later one, reaches ``<point>``
(later: the replay of a batch already decided records nothing, so it passes no recording point).
Unset (always, outside fault tests), every call is a no-op that reads one environment variable.

The points, in the order a batch passes them:

- ``before_write``: nothing of the batch is written (a streaming write's task, before it produces;
  Streams' at-least-once ``foreachBatch``, before the write);
- ``before_record``: the tasks' transactions and the offsets attempt are open, the decision is not
  recorded (the sink's driver-side commit);
- ``before_end``: the decision is recorded, no transaction has ended (ditto);
- ``before_spark_commit``: the transactions have ended, Spark has not yet written the batch to its
  checkpoint's commit log (the end of a streaming write's commit; Streams' ``foreachBatch``, after
  the write);
- ``before_group_commit``: a Connect sink's write is committed (the ``DeltaSink`` connector's Delta
  commit), the consumer group ``connect-<name>`` has not moved (connect/delta_sink.py).

The sink's commit runs in a Python worker of Spark's, not in the driver's process, so a crash kills
more than the calling process: the application must run as a session leader (``Popen(...,
start_new_session=True)``), and the hook kills that leader's process group (the driver and Spark's
JVM, with any worker in it), then itself. Workers forked by Spark's daemon (its own group) go with
the daemon, which exits when the JVM does. To the broker, it is the machine going down.
"""
from __future__ import annotations

import os
import signal

from broker.client.exactly_once import Decision, DecisionLog

ENV = "RIVERLOG_CRASH_AT"
POINTS = ("before_write", "before_record", "before_end", "before_spark_commit", "before_group_commit")


def crash_at(point: str, batch_id: int) -> None:
    """SIGKILL the application if ``RIVERLOG_CRASH_AT`` names this point and this batch or an earlier one."""
    armed = os.environ.get(ENV)
    if not armed:
        return
    at, _, batch = armed.partition(":")
    if at != point or batch_id < int(batch):
        return
    os.killpg(os.getsid(0), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def decision_log(config: dict) -> DecisionLog | None:
    """The decision log with the two crash points around recording, or None (the default log)
    when no crash is armed."""
    return _CrashingLog(config) if os.environ.get(ENV) else None


class _CrashingLog(DecisionLog):
    def record(self, decision: Decision, timeout: float = 30.0) -> None:
        crash_at("before_record", decision.batch_id)
        super().record(decision, timeout)
        crash_at("before_end", decision.batch_id)
