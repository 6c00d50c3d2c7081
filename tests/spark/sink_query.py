"""A streaming query into the riverlog sink in its own process (with its own SparkSession), so a
test can kill its driver with SIGKILL: ``python sink_query.py BOOTSTRAP TOPIC INPUT_DIR CHECKPOINT``."""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

import spark_sink
from tests.spark.child_process import TEST_JVM_OPTIONS, spark_home_without_its_python

bootstrap, topic, input_dir, checkpoint = sys.argv[1:5]
os.environ["SPARK_HOME"] = spark_home_without_its_python()   # its Python workers' pyspark compiled once
spark = (SparkSession.builder.master("local[2]").appName("riverlog-sink-kill")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS).getOrCreate())
spark_sink.register(spark)
(spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(input_dir)
 .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
 .writeStream.format("riverlog").option("riverlog.bootstrap.servers", bootstrap).option("topic", topic)
 .option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds").start().awaitTermination())
