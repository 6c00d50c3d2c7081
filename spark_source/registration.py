"""Registering a Python data source so that its Spark Python workers can import it.

With neither ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` set, Spark runs ``python3`` from
PATH for its Python workers, often an interpreter without Riverlog (the planning worker then
fails with ``No module named 'spark_source'``). PySpark reads the interpreter when it wraps the
registered class, so a source registered on a local session is wrapped with the driver's own.
"""
from __future__ import annotations

import os
import sys


def worker_python(env: dict, conf_python: str | None, master: str, executable: str) -> str | None:
    """The interpreter a source's Spark Python workers should run when Spark's own choice would be
    a guess: on a local master the driver's; otherwise (None) Spark's setting stands."""
    if env.get("PYSPARK_PYTHON") or conf_python or not master.startswith("local"):
        return None
    return executable


def register_data_source(spark, source_class) -> None:
    """``spark.dataSource.register(source_class)``, its workers on :func:`worker_python`."""
    try:
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 — Spark Connect has no SparkContext; the server's setting stands
        sc = None
    chosen = None if sc is None else worker_python(dict(os.environ), sc.getConf().get("spark.pyspark.python"),
                                                   sc.master, sys.executable)
    if chosen is None:
        spark.dataSource.register(source_class)
        return
    default, sc.pythonExec = sc.pythonExec, chosen   # read by PySpark when it wraps the class
    try:
        spark.dataSource.register(source_class)
    finally:
        sc.pythonExec = default
