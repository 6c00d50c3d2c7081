"""A Delta Lake sink for change data: Debezium change events into Delta tables, exactly once.

    from spark_sink.delta import delta_apply
    (changes.writeStream.foreachBatch(delta_apply("/lake", keys={"public.customers": ["id"]}, scd_type=1))
       .option("checkpointLocation", "/ck/lake").start())

:func:`delta_apply` (CDC: SCD type 1 or 2) and :func:`delta_append` (plain topics) return a
function of ``(batch, batch_id)`` for ``foreachBatch``; it also takes Arrow or pandas input, which
is what the ``DeltaSink`` connector and the tests call. Written with delta-rs (``deltalake``);
docs/cdc.md has every option and the guarantees.
"""
from __future__ import annotations

from spark_sink.delta.append import DeltaAppend, delta_append
from spark_sink.delta.config import from_config
from spark_sink.delta.apply import DeltaApply, delta_apply
from spark_sink.delta.results import ApplyResult, DeadLetter, TableResult
from spark_sink.delta.errors import (CommitConflictError, DeltaConfigError, DeltaSinkError, PoisonRecordError,
                                     SchemaChangeError, StaleBatchError)
from spark_sink.delta.maintenance import optimize, vacuum
from spark_sink.delta.table import held_positions

__all__ = ["ApplyResult", "CommitConflictError", "DeadLetter", "DeltaAppend", "DeltaApply", "DeltaConfigError",
           "DeltaSinkError", "PoisonRecordError", "SchemaChangeError", "StaleBatchError", "TableResult",
           "delta_append", "delta_apply", "from_config", "held_positions", "optimize", "vacuum"]
