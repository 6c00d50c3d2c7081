# Riverlog: the two commands are `make demo` and `make test`; everything they need installs from here.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo demo-cdc test test-unit test-simulation test-integration test-spark soak bench proto lint clean check-python

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Riverlog needs Python 3.10 or newer")'
	@java -version >/dev/null 2>&1 || { echo "Riverlog's Spark parts need Java 17 or newer on PATH"; exit 1; }

$(STAMP): pyproject.toml | check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m spark_source.demo

demo-cdc: $(STAMP)
	$(PY) -m spark_source.postgres.demo

# Workers for the whole suite (pytest-xdist): one runs Spark's modules while the other runs the rest,
# which mostly wait on processes and sockets, then both run Spark's last ones; tests/conftest.py
# schedules them.
TEST_WORKERS ?= 2
# The suite starts hundreds of Python processes (brokers, Spark's workers, killed lives): each
# reads the project's modules compiled once, kept under the venv, even where the environment
# turns bytecode off.
PYCACHE := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache

test: $(STAMP)
	$(PYCACHE) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

test-unit: $(STAMP)
	$(PY) -m pytest tests/unit tests/streams tests/connect

test-simulation: $(STAMP)
	$(PY) -m pytest tests/simulation

soak: $(STAMP)
	RIVERLOG_SIM_SEEDS=$${RIVERLOG_SIM_SEEDS:-50000} $(PY) -m pytest tests/simulation -p no:cacheprovider
	HYPOTHESIS_PROFILE=explore $(PY) -m pytest tests/unit tests/streams tests/connect -p no:cacheprovider -q
	RIVERLOG_READINESS_RUNS=$${RIVERLOG_READINESS_RUNS:-50} $(PY) -m pytest tests/integration/test_readiness.py -p no:cacheprovider

test-integration: $(STAMP)
	$(PY) -m pytest tests/integration

test-spark: $(STAMP)
	$(PY) -m pytest tests/spark

bench: $(STAMP)
	$(PY) bench/broker_bench.py
	$(PY) bench/cluster_bench.py
	$(PY) bench/compaction_bench.py
	$(PY) bench/group_bench.py
	$(PY) bench/transaction_bench.py
	$(PY) bench/spark_source_bench.py
	$(PY) bench/sink_bench.py
	$(PY) bench/spark_latency_bench.py
	$(PY) bench/streams_bench.py
	$(PY) bench/streams_join_bench.py
	$(PY) bench/connect_bench.py
	$(PY) bench/cdc_bench.py
	$(PY) bench/cli_bench.py

proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. broker/proto/riverlog.proto

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
