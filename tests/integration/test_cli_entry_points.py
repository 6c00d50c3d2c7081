"""``riverlog``, ``python -m broker`` and ``python -m broker.cli`` are one command with the same commands."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRY_POINTS = {
    "riverlog": [os.path.join(os.path.dirname(sys.executable), "riverlog")],
    "python -m broker": [sys.executable, "-m", "broker"],
    "python -m broker.cli": [sys.executable, "-m", "broker.cli"],
}
COMMANDS = {"broker", "cluster", "topics", "configs", "produce", "consume", "offsets", "delete-records", "groups", "metadata-quorum",
            "transactions", "connect", "streams"}


def _commands(argv: list[str]) -> set[str]:
    out = subprocess.run(argv + ["--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listing = out.stdout.split("Commands:", 1)[1]
    return set(re.findall(r"^  (\S+)", listing, re.MULTILINE))


def test_every_way_of_starting_the_cli_lists_the_same_commands():
    listed = {name: _commands(argv) for name, argv in ENTRY_POINTS.items()}
    assert listed["riverlog"] == COMMANDS, listed
    assert listed["python -m broker"] == listed["riverlog"] == listed["python -m broker.cli"]


def test_a_broker_command_imports_nothing_above_the_broker():
    """The command groups of packages above the broker load only when named (or listed by
    ``--help``): a broker command, and a broker process, start without Spark or pandas."""
    probe = ("import sys; from broker.cli import main; main.get_command(None, 'topics'); "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'streams', 'connect', 'pyspark', 'pandas'}))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr)
    probe = "from broker.cli import main; print(main.get_command(None, 'streams').name)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "streams", out.stderr
