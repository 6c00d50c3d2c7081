"""The lock on an application's directory ``state.dir/<application.id>``, as Kafka's
``StateDirectory`` locks it (its ``.lock`` file): one running instance per directory. Two instances
of one application sharing a ``state.dir`` would run Spark queries on the same checkpoints, and a
``cleanUp()`` would delete the checkpoints of the instance that runs. The lock is an ``flock`` on
``.lock``: held from ``start()`` until the shutdown ends, let go by the system when the process
dies, and taken by each open of the file, so two instances in one process exclude each other too.
An instance that is never started (one that only answers interactive queries) takes no lock.
"""
from __future__ import annotations

import errno
import fcntl
import os

from streams.errors import StreamsError

LOCK_FILE = ".lock"     # Kafka's StateDirectory.LOCK_FILE_NAME


def locked_message(directory: str) -> str:
    """Kafka's ``StateDirectory.initializeProcessId`` message."""
    return (f"Unable to initialize state, this can happen if multiple instances of Kafka Streams are running in "
            f"the same state directory (current state directory is [{directory}]")


class StateDirLock:
    """The lock on ``directory``: :meth:`acquire` raises :class:`StreamsError` while another
    instance holds it; :meth:`release` is idempotent."""

    def __init__(self, directory: str):
        self.directory = directory
        self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self) -> None:
        if self._file is not None:
            return
        os.makedirs(self.directory, exist_ok=True)
        f = open(os.path.join(self.directory, LOCK_FILE), "a")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            f.close()
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StreamsError(locked_message(self.directory)) from None
            raise StreamsError(f"Failed to lock the state directory [{self.directory}] during startup: {e}") from e
        self._file = f

    def release(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()       # closing the file lets go of the flock
