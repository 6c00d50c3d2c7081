"""``python -m broker.cli``: the ``riverlog`` command."""
from broker.cli import main

main(prog_name="riverlog")
