"""PostgreSQL change data capture: ``format("postgres-cdc")``.

Pure parts (the pgoutput decoder, the transaction assembler, value types, Debezium's envelope) sit
under a thin shell that owns the connections (slot, snapshot, replication stream, data source).
"""
