from broker.cli import main

main(prog_name="riverlog")
