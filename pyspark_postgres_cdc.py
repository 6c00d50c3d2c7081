"""Makes ``format("postgres-cdc")`` work in every SparkSession with no register call (PySpark
registers the ``DefaultSource`` of every installed ``pyspark_<name>`` module; see
pyspark_riverlog.py)."""
from spark_source.postgres.cdc_source import PostgresCdcDataSource as DefaultSource

__all__ = ["DefaultSource"]
