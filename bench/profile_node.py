"""Run a node under cProfile, every thread wrapped, and write the merged stats when it exits.

    python bench/profile_node.py OUT.prof broker start --data-dir ... --port ...

Python's profiler follows one thread at a time, so each ``threading.Thread`` (the asyncio loop
thread, the request pool, the replica fetchers) runs under its own ``cProfile.Profile``; at exit
every profile (those of threads still running too) is merged into ``OUT.prof`` for ``pstats``.
gRPC's C threads run no Python and do not appear; their cost shows in ``/proc`` CPU only, which
``OUT.threads`` (one ``native-id name`` line per Python thread) lets a caller split by thread.
"""
from __future__ import annotations

import atexit
import cProfile
import os
import pstats
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()
    original_run = threading.Thread.run

    names = open(out + ".threads", "a", buffering=1)
    names.write(f"{threading.get_native_id()} main\n")

    def run(self):
        profile = cProfile.Profile()
        with lock:
            profiles.append(profile)
            names.write(f"{threading.get_native_id()} {self.name}\n")
        profile.enable()
        try:
            original_run(self)
        finally:
            profile.disable()

    threading.Thread.run = run
    main_profile = cProfile.Profile()
    profiles.append(main_profile)

    def dump():
        main_profile.disable()
        with lock:
            taken = list(profiles)
        stats = None
        for profile in taken:
            try:
                stats = pstats.Stats(profile) if stats is None else stats.add(profile) or stats
            except TypeError:  # a thread that never ran a call has no stats
                continue
        if stats is not None:
            stats.dump_stats(out)

    atexit.register(dump)
    sys.path.insert(0, os.getcwd())
    sys.argv = ["riverlog", *args]
    main_profile.enable()
    from broker.cli import main as cli_main
    cli_main(prog_name="riverlog")


if __name__ == "__main__":
    main()
