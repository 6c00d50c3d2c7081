"""PostgreSQL change data capture: ``format("postgres-cdc")``.

Pure parts sit under a thin shell that owns the connections (slot, snapshot, replication stream,
data source). The pure core, bytes in and Debezium's records out, with no I/O, threads or clocks:

- ``pgoutput`` (+ ``messages``): the pgoutput decoder, protocol versions 1-4, strict, typed errors
  that name the byte offset;
- ``transactions``: the TransactionAssembler, committed transactions only (streamed ones emitted
  at Stream Commit, aborted ones and aborted subtransactions dropped), relations remembered;
- ``types`` (+ ``temporal``): text values as Debezium's JSON values and Connect schemas
  (``decimal.handling.mode``, ``time.precision.mode``, ``binary.handling.mode``, arrays);
- ``envelope`` (+ ``logical_messages``): Debezium's key/value JSON, tombstones, primary-key
  changes, snapshot reads, transaction metadata, and the ``riverlog.cdc.*`` headers;
- ``batch_plan``: what ``spark.read`` reads (batch-only options, tables spread over tasks, the
  peeked slot's messages filtered to the transactions between two offsets).

Importing this package imports neither psycopg2 nor pyspark.
"""
