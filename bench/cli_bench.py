"""Command-line start-up: how long ``riverlog`` takes before it does anything, against the
interpreter's own start in the same run. Every broker command and every broker process
(``riverlog broker start``) pays it; the ``connect`` and ``streams`` command groups, which import
Spark, are paid for only when named. ``client_import`` is what every process that talks to a
broker pays first (a command, a broker, each Spark Python worker reading or writing riverlog);
``client_import_with_pandas`` the same with pandas loaded, as pyarrow's converters loaded it
before :mod:`broker.records.arrow_arrays`.

Each command runs ``--rounds`` times, alternating; the figure is the median wall time of a run.
Prints one JSON line per figure.

    python bench/cli_bench.py [--rounds 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import emit  # noqa: E402 - beside this file

COMMANDS = {
    "interpreter": [sys.executable, "-c", "pass"],                    # the baseline
    "topics_help": [sys.executable, "-m", "broker", "topics", "--help"],  # a broker command's start
    "connect_help": [sys.executable, "-m", "broker", "connect", "--help"],  # a plugin group, imported
    "client_import": [sys.executable, "-c", "import broker.client"],
    "client_import_with_pandas": [sys.executable, "-c", "import pandas, broker.client"],
    "broker_import": [sys.executable, "-c", "import broker.server.service"],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            t = time.perf_counter()
            subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
            runs[name].append(time.perf_counter() - t)
    base = statistics.median(runs["interpreter"])
    for name, values in runs.items():
        median = statistics.median(values)
        emit(f"cli_start.{name}", median, "s", min=round(min(values), 3), max=round(max(values), 3),
             over_interpreter=round(median - base, 3))


if __name__ == "__main__":
    main()
