"""Partition replication as pure logic: what a leader tracks (ISR, high watermark), how a leader is
elected, and how a follower truncates and adopts the high watermark.

Nothing here owns a socket, a thread, a clock or a disk: callers pass time in (``now_ms``) and act
on the answers. The partition and the fetcher threads are the shell around it.
"""
