"""Small checkpoint files written atomically (temp file, fsync, rename, fsync the directory).

A reader sees the old value or the new one, never a torn mix, whatever moment the process dies.
Used for a partition's recovery point and log start offset.
"""
from __future__ import annotations

import os


def write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_int(path: str, default: int) -> int:
    try:
        with open(path, "rb") as f:
            return int(f.read().strip() or default)
    except (FileNotFoundError, ValueError):
        return default


def write_int(path: str, value: int) -> None:
    write_atomically(path, str(value).encode())
